"""Matchers and the append-only check: errors name the first differing message and field."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from tito.errors import AppendOnlyError, ConfigurationError, RoleNotAllowedError
from tito.matching import (
    MATCHING_POLICIES,
    appended_messages,
    loose_tool_call_message_matches,
    match_resend,
    matching_policy,
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
    with pytest.raises(RoleNotAllowedError, match=r"message 3: role 'user' is not supported.*roles: tool"):
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


# ---- the harness policy: what agent frameworks drop or reformat still matches, nothing else does ----

HARNESS = MATCHING_POLICIES["harness"]
THOUGHT = {
    "role": "assistant",
    "content": None,
    "reasoning_content": "Call the tool.",
    "tool_calls": [{"id": "call_a", "type": "function", "function": {"name": "f", "arguments": '{"a": 1, "b": true}'}}],
}
ANSWER = {"role": "tool", "tool_call_id": "call_a", "content": "42"}


def resent(**changes: Any) -> dict[str, Any]:
    """THOUGHT as a framework resends it: fields replaced (None removes one), or its one call's fields replaced."""
    call_changes = changes.pop("call", {})
    message = {key: value for key, value in {**THOUGHT, **changes}.items() if value is not None or key == "content"}
    call = THOUGHT["tool_calls"][0]
    message["tool_calls"] = [{**call, **call_changes}]
    return message


HARNESS_ACCEPTS = [
    pytest.param(resent(reasoning_content=None), {"reasoning_dropped"}, id="reasoning-dropped"),
    pytest.param(resent(reasoning_content=""), {"reasoning_dropped"}, id="reasoning-empty"),
    pytest.param(
        resent(call={"function": {"name": "f", "arguments": '{"b":true,"a":1}'}}), {"arguments_as_json"}, id="args"
    ),
    pytest.param(resent(content=""), {"empty_content"}, id="empty-content"),
    pytest.param(resent(call={"id": "call_mine"}), {"call_ids_regenerated"}, id="call-id"),
    pytest.param(resent(content="\n"), {"whitespace_content"}, id="whitespace-content"),
    pytest.param(
        resent(
            reasoning_content=None,
            content="",
            call={"id": "x", "function": {"name": "f", "arguments": {"a": 1, "b": True}}},
        ),
        {"reasoning_dropped", "empty_content", "call_ids_regenerated", "arguments_as_json"},
        id="all-at-once",
    ),
]


@pytest.mark.parametrize(("sent", "rules"), HARNESS_ACCEPTS)
def test_harness_attaches_a_resend_missing_or_reformatting_only_what_frameworks_drop(
    sent: dict[str, Any], rules: set[str]
) -> None:
    stored = [{"role": "user", "content": "q"}, THOUGHT]
    if rules & {"reasoning_dropped", "arguments_as_json"}:
        with pytest.raises(AppendOnlyError):
            appended_messages(stored, [stored[0], sent], ("user",))  # strict refuses these
    found = match_resend(stored, [stored[0], sent], HARNESS)
    assert found.rules == rules
    assert HARNESS.key(THOUGHT) == HARNESS.key(sent)


HARNESS_REFUSES = [
    pytest.param(resent(reasoning_content="Something else."), "reasoning_content", id="other-reasoning"),
    pytest.param(
        resent(call={"function": {"name": "f", "arguments": '{"a": 2, "b": true}'}}),
        "tool_calls[0].function.arguments",
        id="other-args",
    ),
    pytest.param(
        resent(call={"function": {"name": "g", "arguments": '{"a": 1, "b": true}'}}),
        "tool_calls[0].function.name",
        id="other-tool",
    ),
    pytest.param(resent(content="I will call f."), "content", id="added-content"),
    pytest.param(resent(content=[{"type": "text", "text": " x "}]), "content", id="added-text-part"),
    pytest.param(
        resent(call={"function": {"name": "f", "arguments": '{"a": 1, "b": 1}'}}),
        "tool_calls[0].function.arguments",
        id="bool-is-not-a-number",
    ),
    pytest.param({**resent(), "tool_calls": []}, "tool_calls", id="dropped-call"),
]


@pytest.mark.parametrize(
    ("sent", "rule"),
    [
        ({"role": "assistant", "content": [{"type": "text", "text": "Done."}]}, "content_as_parts"),
        ({"role": "assistant", "content": [{"type": "text", "text": "Do"}, {"type": "text", "text": "ne."}]},
         "content_as_parts"),
    ],
)  # fmt: skip
def test_a_reply_resent_as_text_parts_matches_the_stored_string(sent: dict[str, Any], rule: str) -> None:
    """strands' OpenAI model resends the reply as text parts; tito renders them as the same string."""
    stored = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "Done."}]
    assert match_resend(stored, [stored[0], sent], HARNESS).rules == {rule}
    assert HARNESS.key(stored[1]) == HARNESS.key(sent)
    with pytest.raises(AppendOnlyError, match="'content'"):
        match_resend(
            stored, [stored[0], {"role": "assistant", "content": [{"type": "text", "text": "Other."}]}], HARNESS
        )


@pytest.mark.parametrize(("sent", "field"), HARNESS_REFUSES)
def test_harness_refuses_any_other_change_and_names_the_field(sent: dict[str, Any], field: str) -> None:
    stored = [{"role": "user", "content": "q"}, THOUGHT]
    with pytest.raises(
        AppendOnlyError, match=re.escape(f"message 1 differs from the stored conversation in '{field}'")
    ):
        appended_messages(stored, [stored[0], sent], ("user",), HARNESS)


def test_regenerated_call_ids_map_the_tool_messages_back_to_the_stored_ids() -> None:
    second = {**THOUGHT, "tool_calls": [{**THOUGHT["tool_calls"][0], "id": "call_b"}]}
    stored = [{"role": "user", "content": "q"}, THOUGHT, ANSWER, second]
    sent = [stored[0], resent(call={"id": "mine_1"}), {**ANSWER, "tool_call_id": "mine_1"}]
    sent += [
        {**second, "tool_calls": [{**second["tool_calls"][0], "id": "mine_2"}]},
        {**ANSWER, "tool_call_id": "mine_2"},
    ]
    appended = appended_messages(stored, sent, ("tool",), HARNESS)
    assert appended == [{**ANSWER, "tool_call_id": "call_b"}]  # rendered and stored with the model's own id
    assert sent[-1]["tool_call_id"] == "mine_2", "the inputs are not changed"


def test_call_ids_must_pair_one_to_one() -> None:
    two = {**THOUGHT, "tool_calls": [THOUGHT["tool_calls"][0], {**THOUGHT["tool_calls"][0], "id": "call_b"}]}
    stored = [{"role": "user", "content": "q"}, two]
    same_id_twice = {**two, "tool_calls": [{**call, "id": "mine"} for call in two["tool_calls"]]}
    with pytest.raises(AppendOnlyError, match=re.escape("'tool_calls[1].id'")):
        appended_messages(stored, [stored[0], same_id_twice], ("user",), HARNESS)
    swapped = {
        **two,
        "tool_calls": [{**two["tool_calls"][0], "id": "call_b"}, {**two["tool_calls"][1], "id": "call_a"}],
    }
    with pytest.raises(AppendOnlyError, match=re.escape("'tool_calls[1].id'")):  # call_a was paired with call_b
        appended_messages(stored, [stored[0], swapped], ("user",), HARNESS)


def test_a_tool_message_answering_another_call_than_stored_is_refused() -> None:
    stored = [{"role": "user", "content": "q"}, THOUGHT, ANSWER, {**THOUGHT, "reasoning_content": "Again."}]
    sent = [stored[0], resent(call={"id": "mine_1"}), {**ANSWER, "tool_call_id": "unknown"}]
    with pytest.raises(
        AppendOnlyError, match=re.escape("message 2 differs from the stored conversation in 'tool_call_id'")
    ):
        appended_messages(stored, [*sent, stored[3]], ("tool",), HARNESS)


@pytest.mark.parametrize(("stored", "sent"), MATCH_KEY_CASES)
def test_harness_accepts_everything_strict_accepts_and_its_key_never_separates_a_match(
    stored: dict[str, Any], sent: dict[str, Any]
) -> None:
    if strict_message_matches(stored, sent) is None:
        assert HARNESS(stored, sent) is None
    if HARNESS(stored, sent) is None:
        assert HARNESS.key(stored) == HARNESS.key(sent)


def test_reasoning_sent_where_none_was_stored_is_refused() -> None:
    """Dropping is the only direction: reasoning the model did not write would be a different reply."""
    plain = {"role": "assistant", "content": "hi"}
    assert HARNESS(plain, {**plain, "reasoning_content": "made up"}) == "reasoning_content"


def test_policies_are_found_by_name_and_an_unknown_name_lists_them() -> None:
    assert matching_policy("strict").name == "strict" and matching_policy("harness") is HARNESS
    with pytest.raises(ConfigurationError, match="unknown matcher 'loose'; choose one of: strict, harness"):
        matching_policy("loose")
