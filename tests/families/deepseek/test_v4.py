"""DeepSeek-V4 encoder: byte parity with the published encoder, folding and tool-result order."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tito.errors import ConfigurationError
from tito.families.deepseek import v4
from tito.families.deepseek.common import ASSISTANT, BOS, EOS, THINK_END, THINK_START, USER

from .conversations import (
    DROP,
    KEEP,
    PARITY,
    Message,
    assert_encoding_leaves_input_alone,
    assistant,
    conversations,
    generation_prompt_due,
    reference_encoder,
    reference_render,
    texts,
    tool_lists,
)

_EFFORTS = [(profile, effort) for profile, efforts in v4.EFFORT_PROMPTS.items() for effort in (None, *efforts)]


@pytest.fixture(scope="module")
def reference() -> Any:
    return reference_encoder("dsv4")


@PARITY
@given(messages=conversations(reasoning=texts), tools=tool_lists, thinking=st.booleans(), drop=st.booleans())
def test_equals_the_reference_byte_for_byte_with_either_drop_thinking(
    reference: Any, messages: list[Message], tools: Any, thinking: bool, drop: bool
) -> None:
    """With drop_thinking=False the reference already keeps every reasoning: the pinned render is the reference's
    on every well-formed conversation; with drop_thinking=True ours reproduces the reference's dropping."""
    expected = reference_render(reference, messages, tools, thinking, drop_thinking=drop)
    kwargs = {**(DROP if drop else KEEP), "thinking": thinking}
    assert v4.encode(messages, tools, generation_prompt_due(messages), kwargs) == expected


@settings(max_examples=60, deadline=None)
@given(messages=conversations(), effort=st.sampled_from(_EFFORTS), thinking=st.booleans())
def test_reasoning_effort_prompt_equals_the_reference(
    reference: Any, messages: list[Message], effort: tuple[str, str | None], thinking: bool
) -> None:
    profile, level = effort
    placed = [{"role": "system", "content": ""}, *copy.deepcopy(messages)] if messages[0]["role"] != "system" else (
        copy.deepcopy(messages)
    )  # fmt: skip
    expected = reference.encode_messages(
        placed,
        thinking_mode="thinking" if thinking else "chat",
        drop_thinking=False,
        reasoning_effort=level,
        reasoning_effort_profile=profile,
    )
    kwargs = {**KEEP, "thinking": thinking, "reasoning_effort": level, "reasoning_effort_profile": profile}
    assert v4.encode(messages, None, generation_prompt_due(messages), kwargs) == expected


def test_unknown_reasoning_effort_names_the_choices() -> None:
    with pytest.raises(ConfigurationError, match="choose one of high, max"):
        v4.encode([], None, True, {"reasoning_effort": "medium"})


@settings(max_examples=100, deadline=None)
@given(messages=conversations(reasoning=texts), tools=tool_lists, thinking=st.booleans())
def test_encoding_never_mutates_the_messages(messages: list[Message], tools: Any, thinking: bool) -> None:
    assert_encoding_leaves_input_alone(v4.encode, messages, tools, thinking)


def _call(call_id: str) -> Message:
    return {"id": call_id, "type": "function", "function": {"name": "f", "arguments": {}}}


def test_tool_and_user_turns_fold_into_one_user_block_in_call_order() -> None:
    messages = [
        {"role": "user", "content": "go"},
        assistant("", "plan", [_call("a"), _call("b"), _call("c")]),
        {"role": "tool", "tool_call_id": "c", "content": "C"},
        {"role": "tool", "tool_call_id": "a", "content": "A"},
        {"role": "user", "content": "note"},
        {"role": "tool", "tool_call_id": "b", "content": "B"},
    ]
    rendered = v4.encode(messages, None, True, {**KEEP, "thinking": True})
    block = "\n\n".join(
        ["<tool_result>A</tool_result>", "<tool_result>B</tool_result>", "note", "<tool_result>C</tool_result>"]
    )
    assert rendered.endswith(f"{EOS}{USER}{block}{ASSISTANT}{THINK_START}")


def test_tool_results_take_the_order_of_the_nearest_assistant_only() -> None:
    """A deliberate deviation: results after an assistant that made no calls keep their message order, so a
    turn's render needs only the last assistant (reference: the order of an older assistant's calls)."""
    messages = [
        {"role": "user", "content": "go"},
        assistant("", "plan", [_call("a"), _call("b")]),
        {"role": "tool", "tool_call_id": "a", "content": "A"},
        {"role": "tool", "tool_call_id": "b", "content": "B"},
        assistant("done", "ok"),
        {"role": "tool", "tool_call_id": "b", "content": "B2"},
        {"role": "tool", "tool_call_id": "a", "content": "A2"},
    ]
    rendered = v4.encode(messages, None, True, {**KEEP, "thinking": False})
    assert rendered.endswith(
        f"{USER}<tool_result>B2</tool_result>\n\n<tool_result>A2</tool_result>{ASSISTANT}{THINK_END}"
    )


def test_user_block_gets_the_assistant_opener_only_before_an_assistant_or_the_generation_prompt() -> None:
    messages = [{"role": "user", "content": "u"}, {"role": "system", "content": "S"}]
    assert v4.encode(messages, None, True, {**KEEP, "thinking": True}) == (f"{BOS}{USER}uS{ASSISTANT}{THINK_START}")
    assert v4.encode(messages[:1], None, False, {**KEEP, "thinking": True}) == f"{BOS}{USER}u"
