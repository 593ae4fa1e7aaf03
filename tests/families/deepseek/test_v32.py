"""DeepSeek-V3.2 encoder: byte parity with the published encoder, and what it does differently on purpose."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tito.errors import TemplateRenderError
from tito.families.deepseek import v32
from tito.families.deepseek.common import ASSISTANT, EOS, THINK_END, THINK_START, USER

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


@pytest.fixture(scope="module")
def reference() -> Any:
    return reference_encoder("dsv32")


def _assistants_before_last_user(messages: list[Message]) -> bool:
    last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)
    return any(m["role"] == "assistant" for m in messages[:last_user])


@PARITY
@given(messages=conversations(reasoning=texts), tools=tool_lists, thinking=st.booleans())
def test_drop_thinking_true_equals_the_reference_byte_for_byte(
    reference: Any, messages: list[Message], tools: Any, thinking: bool
) -> None:
    kwargs = {**DROP, "thinking": thinking}
    try:
        expected = reference_render(reference, messages, tools, thinking, drop_thinking=True)
    except reference.DS32EncodingError:
        # The reference's one refusal on well-formed input: a reasoning-less reply after the last user turn.
        with pytest.raises(TemplateRenderError, match="reasoning_content"):
            v32.encode(messages, tools, generation_prompt_due(messages), kwargs)
        return
    assert v32.encode(messages, tools, generation_prompt_due(messages), kwargs) == expected


@PARITY
@given(data=st.data(), tools=tool_lists, thinking=st.booleans())
def test_drop_thinking_false_equals_the_reference_where_it_keeps_all_reasoning(
    reference: Any, data: st.DataObject, tools: Any, thinking: bool
) -> None:
    """The reference keeps reasoning only after the last user turn: with thinking off, or in a one-turn session
    (no assistant before the last user turn), it drops nothing and the pinned render must equal it."""
    messages = data.draw(conversations(one_turn=thinking))
    assert not (thinking and _assistants_before_last_user(messages))
    expected = reference_render(reference, messages, tools, thinking, drop_thinking=False)
    assert v32.encode(messages, tools, generation_prompt_due(messages), {**KEEP, "thinking": thinking}) == expected


@settings(max_examples=100, deadline=None)
@given(messages=conversations(reasoning=texts), tools=tool_lists, thinking=st.booleans())
def test_encoding_never_mutates_the_messages(messages: list[Message], tools: Any, thinking: bool) -> None:
    assert_encoding_leaves_input_alone(v32.encode, messages, tools, thinking)


def test_pinned_render_keeps_earlier_reasoning_and_opens_thinking_after_every_user_turn() -> None:
    messages = [
        {"role": "user", "content": "a"},
        assistant("A", "first thought"),
        {"role": "user", "content": "b"},
    ]
    rendered = v32.encode(messages, None, True, {**KEEP, "thinking": True})
    assert rendered.endswith(
        f"{USER}a{ASSISTANT}{THINK_START}first thought{THINK_END}A{EOS}{USER}b{ASSISTANT}{THINK_START}"
    )
    dropped = v32.encode(messages, None, True, {**DROP, "thinking": True})
    assert "first thought" not in dropped and f"{USER}a{ASSISTANT}{THINK_END}A{EOS}" in dropped


def test_reasoning_required_error_only_with_drop_thinking() -> None:
    messages = [{"role": "user", "content": "a"}, assistant("A", None)]
    with pytest.raises(TemplateRenderError, match="reasoning_content"):
        v32.encode(messages, None, False, {**DROP, "thinking": True})
    assert v32.encode(messages, None, False, {**KEEP, "thinking": True}).endswith(f"{THINK_START}{THINK_END}A{EOS}")


def test_tool_results_continue_the_assistant_span_and_end_in_the_think_token() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"q": "x", "n": 2}}}
    messages = [
        {"role": "user", "content": "go"},
        assistant("", "plan", [call]),
        {"role": "tool", "tool_call_id": "c1", "content": "R"},
    ]
    for thinking in (True, False):
        rendered = v32.encode(messages, None, True, {**KEEP, "thinking": thinking})
        token = THINK_START if thinking else THINK_END
        assert rendered.endswith(f"{EOS}\n\n<function_results>\n<result>R</result>\n</function_results>\n\n{token}")
        assert not v32.encode(messages, None, False, {**KEEP, "thinking": thinking}).endswith(token)


def test_user_turn_after_tool_results_closes_the_thinking_slot() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {}}}
    messages = [
        {"role": "user", "content": "go"},
        assistant("", "plan", [call]),
        {"role": "tool", "tool_call_id": "c1", "content": "R"},
        {"role": "user", "content": "more"},
    ]
    rendered = v32.encode(messages, None, True, {**KEEP, "thinking": True})
    assert rendered.endswith(f"</function_results>\n\n{THINK_END}{USER}more{ASSISTANT}{THINK_START}")
