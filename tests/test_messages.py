"""Message normalisation: clear errors that name the message, and argument handling per format."""

from __future__ import annotations

import pytest

from tito.errors import MessageError
from tito.families.base import ToolArguments
from tito.messages import normalize_messages


def test_text_parts_become_one_string_and_input_is_not_mutated() -> None:
    original = [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
    assert normalize_messages(original, ToolArguments.JSON_TEXT)[0]["content"] == "ab"
    assert isinstance(original[0]["content"], list)


@pytest.mark.parametrize(
    ("message", "pattern"),
    [
        ({"role": "developer", "content": "x"}, r"message 1: field 'role'"),
        ({"role": "user", "content": [{"type": "image_url"}]}, r"message 1: field 'content\[0\]'"),
        ({"role": "user", "content": 3}, r"message 1: field 'content'"),
        ({"role": "assistant", "tool_calls": [{"function": {"name": ""}}]}, r"tool_calls\[0\]\.function\.name"),
        ({"role": "user", "content": "x", "tool_calls": [{"function": {"name": "f"}}]}, "only assistant"),
    ],
)
def test_malformed_messages_name_index_and_field(message: dict, pattern: str) -> None:
    with pytest.raises(MessageError, match=pattern):
        normalize_messages([{"role": "user", "content": "ok"}, message], ToolArguments.JSON_TEXT)


def test_object_formats_decode_json_string_arguments_and_reject_bad_json() -> None:
    call = {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": '{"x": true}'}}]}
    decoded = normalize_messages([call], ToolArguments.OBJECT)[0]["tool_calls"][0]["function"]["arguments"]
    assert decoded == {"x": True}
    kept = normalize_messages([call], ToolArguments.JSON_TEXT)[0]["tool_calls"][0]["function"]["arguments"]
    assert kept == '{"x": true}'
    bad = {**call, "tool_calls": [{"function": {"name": "f", "arguments": "{x"}}]}
    with pytest.raises(MessageError, match="is not valid JSON"):
        normalize_messages([bad], ToolArguments.OBJECT, first_index=4)
