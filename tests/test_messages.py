"""Message normalisation: clear errors that name the message, and argument handling per format."""

from __future__ import annotations

import array
from typing import Any

import pytest

from tito.errors import MessageError
from tito.families.base import ToolArguments
from tito.messages import check_tool_call_ids, is_item_sequence, normalize_messages


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


def _call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "run", "arguments": "{}"}}


def test_a_tool_result_may_answer_a_call_made_many_messages_before_it() -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    messages.append({"role": "assistant", "content": "", "tool_calls": [_call("call_far")]})
    for turn in range(20):
        messages += [{"role": "user", "content": f"more {turn}"}, {"role": "assistant", "content": "ok"}]
    messages.append({"role": "tool", "tool_call_id": "call_far", "content": "done"})
    check_tool_call_ids(messages, first_new=len(messages) - 1)
    check_tool_call_ids(messages)


def test_only_the_messages_from_first_new_are_checked_and_a_wrong_one_names_its_index_and_the_calls_made() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [_call("call_1")]},
        {"role": "tool", "tool_call_id": "call_stale", "content": "stored before"},
        {"role": "tool", "tool_call_id": "call_1", "content": "new"},
    ]
    check_tool_call_ids(messages, first_new=3)  # message 2 was checked when it was new
    with pytest.raises(MessageError, match=r"message 2.*'call_stale' answers no tool call.*'call_1'"):
        check_tool_call_ids(messages, first_new=2)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        *[([], True), ((1, 2), True), (array.array("i", [1]), True), (range(3), True)],
        *[("ab", False), (b"ab", False), ({"role": "user"}, False), (None, False), (iter([1]), False)],
    ],
)
def test_a_list_is_any_sequence_but_a_string(value: Any, expected: bool) -> None:
    """A list is told in C first; what passes is what the Sequence check alone passed."""
    assert is_item_sequence(value) is expected
