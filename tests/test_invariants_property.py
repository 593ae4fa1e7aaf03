"""Invariants 1-3 on random conversations (hypothesis), every fixed family, beyond the matrix's fixed shapes.

A conversation is a random walk over user turns, tool-calling assistants with their results, injected
assistants and mid-session system notes, with random (unicode) text, some of it quoting chat markers; each
generated assistant is a cut. Both content modes: special-token text in content as control tokens or as text.
Beside tito's own canonical ids, the oracle is the tokenizer library (`tito.conformance.tokenizer_disagreement`).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import family_tito
from tito.conformance import TOOLS, simulated_stored_ids, tokenizer_disagreement
from tito.content_tokens import ContentMode
from tito.families import fixed_families

FAMILIES = fixed_families()
RANDOM_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=30)
QUOTED_MARKERS = ("<|im_end|>\n<|im_start|>system\n", "<think>", "</think>", "<tool_call>", "<|observation|>", "[e~[")
TEXT = st.one_of(
    RANDOM_TEXT,
    st.builds(lambda a, marker, b: a + marker + b, RANDOM_TEXT, st.sampled_from(QUOTED_MARKERS), RANDOM_TEXT),
)
ARGUMENTS = st.fixed_dictionaries({"query": TEXT}, optional={"limit": st.integers(0, 9), "filters": st.just({})})


@st.composite
def conversations(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[int]]:
    """Messages and the indices of generated assistants (the cuts)."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": draw(TEXT)},
        {"role": "user", "content": draw(TEXT)},
    ]
    cuts = []
    for step in range(draw(st.integers(1, 4))):
        calls = [
            {"id": f"call_{step}_{i}", "type": "function", "function": {"name": "search", "arguments": draw(ARGUMENTS)}}
            for i in range(draw(st.integers(0, 2)))
        ]
        assistant = {"role": "assistant", "content": "" if calls else draw(TEXT), "reasoning_content": draw(TEXT)}
        messages.append({**assistant, "tool_calls": calls} if calls else assistant)
        cuts.append(len(messages) - 1)
        messages += [{"role": "tool", "tool_call_id": call["id"], "content": draw(TEXT)} for call in calls]
        extra = draw(st.sampled_from(["user", "system", "injected", "none"]))
        if extra == "injected":
            messages.append({"role": "assistant", "content": draw(TEXT)})
        elif extra != "none":
            messages.append({"role": extra, "content": draw(TEXT)})
        if not calls and extra in ("none", "injected", "system"):
            messages.append({"role": "user", "content": draw(TEXT)})
    return messages, cuts


@pytest.mark.parametrize("mode", ["control", "text"])
@pytest.mark.parametrize("family", FAMILIES)
def test_random_conversations_keep_every_invariant(family: str, mode: ContentMode) -> None:
    tt = family_tito(family, mode)

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(conversations())
    def check(conversation: tuple[list[dict[str, Any]], list[int]]) -> None:
        messages, cuts = conversation
        for cut, next_cut in zip(cuts, [*cuts[1:], len(messages)], strict=True):
            old, new = messages[: cut + 1], messages[:next_cut]
            if len(new) == len(old):
                continue
            before = tt.render(old, TOOLS)
            after = tt.render(new, TOOLS, add_generation_prompt=True)
            assert after.startswith(before), "Invariant 1: the stored render must be a byte prefix"
            stored = simulated_stored_ids(tt, old)
            merged = tt.merge_tokens(old, new, stored, TOOLS)
            assert merged == tt.tokenize(new, TOOLS, add_generation_prompt=True), "Invariants 2-3"
            assert tokenizer_disagreement(tt, merged, new, after) is None, "the tokenizer library disagrees"
            kept = stored[: tt.kept_stored_ids(stored)]
            assert merged[: len(kept)] == kept

    check()
