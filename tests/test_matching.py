"""Matchers and the append-only check: errors name the first differing message and field."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tito.errors import AppendOnlyError, RoleNotAllowedError
from tito.matching import (
    appended_messages,
    loose_tool_call_message_matches,
    strict_match_key,
    strict_message_matches,
)

CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1, "b": [true]}'}}
STORED = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "", "tool_calls": [CALL]}]
RESPELLED = {**CALL, "function": {"name": "f", "arguments": '{"b":[true],"a":1}'}}


def test_strict_rejects_respelled_arguments_and_names_the_field() -> None:
    sent = [STORED[0], {**STORED[1], "tool_calls": [RESPELLED]}]
    with pytest.raises(AppendOnlyError, match=r"message 1 .*tool_calls\[0\]\.function\.arguments"):
        appended_messages(STORED, sent, ("user",))


def test_loose_tool_call_accepts_json_equal_arguments_only() -> None:
    sent = [STORED[0], {**STORED[1], "tool_calls": [RESPELLED]}]
    assert appended_messages(STORED, sent, ("user",), loose_tool_call_message_matches) == []
    other = {**CALL, "function": {"name": "f", "arguments": '{"a": 2, "b": [true]}'}}
    assert loose_tool_call_message_matches(STORED[1], {**STORED[1], "tool_calls": [other]}) is not None


def test_none_and_empty_content_match() -> None:
    assert strict_message_matches({"role": "assistant", "content": None}, {"role": "assistant", "content": ""}) is None


def test_shorter_request_is_an_error() -> None:
    with pytest.raises(AppendOnlyError, match="resend the whole stored conversation"):
        appended_messages(STORED, STORED[:1], ("user",))


def test_a_shorter_request_names_its_first_changed_message_before_the_missing_ones() -> None:
    with pytest.raises(AppendOnlyError, match=r"^message 0 differs .* in 'content'") as error:
        appended_messages(STORED, [{"role": "user", "content": "changed"}], ("user",))
    assert (error.value.index, error.value.field) == (0, "content")


def test_role_gate_names_index_and_allowed_roles() -> None:
    sent = [*STORED, {"role": "tool", "content": "r", "tool_call_id": "c1"}, {"role": "user", "content": "u"}]
    with pytest.raises(RoleNotAllowedError, match=r"message 3 has role 'user'.*allowed append roles: tool"):
        appended_messages(STORED, sent, ("tool",))


def test_matchers_do_not_mutate_either_input() -> None:
    stored, sent = copy.deepcopy(STORED), copy.deepcopy([*STORED, {"role": "user", "content": "u"}])
    appended_messages(stored, sent, ("user",), loose_tool_call_message_matches)
    assert stored == STORED and sent[:2] == STORED


MATCH_KEY_CASES = [
    ({"role": "assistant", "content": None}, {"role": "assistant", "content": "", "refusal": None}),
    ({"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b"}),
    ({"role": "assistant", "content": "a"}, {"role": "user", "content": "a"}),
    (STORED[1], {**STORED[1], "tool_calls": [RESPELLED]}),
    (STORED[1], {**STORED[1], "tool_calls": [{**CALL, "id": "other id"}]}),
    (STORED[1], {**STORED[1], "tool_calls": []}),
    (
        {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {"a": [1, {"b": 2}]}}}]},
        {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {"a": [1, {"b": 3}]}}}]},
    ),
    (
        {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1, "y": [2]}}}]},
        {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {"y": [2], "x": 1}}}]},
    ),
    ({"role": "user", "content": [{"type": "text", "text": "a"}]}, {"role": "user", "content": "a"}),
    ({"role": "tool", "content": "r", "tool_call_id": "1"}, {"role": "tool", "content": "r", "tool_call_id": "2"}),
]


@pytest.mark.parametrize(("stored", "sent"), MATCH_KEY_CASES)
def test_strict_match_keys_are_equal_exactly_when_the_strict_matcher_matches(
    stored: dict[str, Any], sent: dict[str, Any]
) -> None:
    matches = strict_message_matches(stored, sent) is None
    assert (strict_match_key(stored) == strict_match_key(sent)) == matches
    assert (hash(strict_match_key(stored)) == hash(strict_match_key(sent))) or not matches
