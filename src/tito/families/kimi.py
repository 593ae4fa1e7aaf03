"""Kimi families: Kimi K2.5 and K2.6 (Moonshot AI), thinking models with `<|im_middle|>` turns.

Boundary fact: a turn is `<|im_{user,assistant,system}|>{name}<|im_middle|>{body}<|im_end|>` with nothing
after `<|im_end|>` (Junction.PLAIN): the model stops on `<|im_end|>` and the next turn's marker follows
directly. `<|im_middle|>` separates the role name from the body inside one turn; it is not a boundary.
Tool results are `<|im_system|>tool<|im_middle|>## Return of {id}\\n...`; tool-call arguments are JSON text
inside `<|tool_call_argument_begin|>`, so the model's own spelling is kept (ToolArguments.JSON_TEXT).

Quirk: the official templates split the conversation at the last assistant without tool calls and drop the
reasoning of every assistant up to it, so a final answer (or an injected assistant) rewrites all earlier
turns. Our templates pin `preserve_thinking=True` (K2.6's own switch; K2.5 had none) and keep every
assistant's reasoning. Evidence: official `last_non_tool_call_assistant_msg` split. Pinned by
tests/families/test_kimi.py (parity with the official templates, append-only matrix, negative control).

Imports from tito: families.base, families.engine_recipe.
"""

from __future__ import annotations

import dataclasses

from tito.families.base import VALID_APPEND_ROLES, Family, FixedTemplate, Junction, ToolArguments
from tito.families.engine_recipe import EngineRecipe, ParserNames

_KIMI_STOPS = ("<|im_end|>", "[EOS]")
_KIMI_STOP_CLOSING = {"[EOS]": "<|im_end|>"}
"""`[EOS]` ends a document, not a turn: the template never writes it, so tito closes the turn after it with
`<|im_end|>` (prompt ids, loss mask 0)."""
_KIMI_SPECIALS = (
    "<|im_user|>",
    "<|im_assistant|>",
    "<|im_system|>",
    "<|im_middle|>",
    "<|im_end|>",
    "[EOS]",
    "<think>",
    "</think>",
    "<|tool_calls_section_begin|>",
    "<|tool_calls_section_end|>",
    "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
    "<|media_begin|>",
    "<|media_content|>",
    "<|media_pad|>",
    "<|media_end|>",
)
"""`<|kimi_k25_video_placeholder|>` is not here: the multimodal processor replaces it before tokenization."""
_NULL_REASONING = (
    "a null reasoning renders as empty (official: the text `None`), which no model ever sampled after `<think>`"
)

KIMI25 = Family(
    name="kimi25",
    summary="Kimi K2.5 (moonshotai/Kimi-K2.5): thinking by default, `thinking=false` turns it off",
    fixed_template=FixedTemplate("kimi25.jinja", {"preserve_thinking": True}, VALID_APPEND_ROLES),
    junction=Junction.PLAIN,
    end_of_turn="<|im_end|>",
    stop_tokens=_KIMI_STOPS,
    stop_closing=_KIMI_STOP_CLOSING,
    assistant_opener="<|im_assistant|>assistant<|im_middle|>",
    output_format="kimi",
    special_tokens=_KIMI_SPECIALS,
    tool_arguments=ToolArguments.JSON_TEXT,
    thinking_kwarg="thinking",
    official_template="kimi-k2.5.jinja",
    engine_recipe=EngineRecipe(ParserNames("kimi_k2", "kimi_k2"), ParserNames("kimi_k2", "kimi_k2")),
    deviations=(
        "reasoning of every assistant is kept (preserve_thinking=True, K2.6's switch; official K2.5 has none and "
        "drops the reasoning of every assistant up to the last one without tool calls), so a final answer or an "
        "injected assistant never rewrites history; preserve_thinking=false renders exactly the official K2.5 "
        "(test_flipped_kwarg_renders_the_official_template)",
        _NULL_REASONING,
    ),
)

KIMI26 = dataclasses.replace(
    KIMI25,
    name="kimi26",
    summary="Kimi K2.6 (moonshotai/Kimi-K2.6): thinking by default, `thinking=false` turns it off",
    fixed_template=FixedTemplate("kimi26.jinja", {"preserve_thinking": True}, VALID_APPEND_ROLES),
    official_template="kimi-k2.6.jinja",
    deviations=(
        "preserve_thinking is pinned true (official default: false, which drops the reasoning of every assistant "
        "up to the last one without tool calls, and all reasoning when thinking=false), so appending never "
        "rewrites history; with the same kwarg the official template renders identically",
        _NULL_REASONING + "; a non-string `reasoning` falls back to `reasoning_content`",
    ),
)
"""K2.6 renders like K2.5 but has its own template: preserve_thinking is official there, default false."""

FAMILIES = (KIMI25, KIMI26)
