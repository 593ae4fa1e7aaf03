"""MiniMax families: MiniMax-M2.5 and M2.7, interleaved thinking with XML-parameter tool calls.

Boundary fact: every turn is `]~b]{role}\\n...[e~[` followed by `\\n`; the model stops on `[e~[` (the
end-of-sequence token) and the template writes the `\\n`, which tito inserts (Junction.NEWLINE_AFTER_STOP).
Tool calls are `<invoke name=..><parameter name=k>v</parameter>...`: arguments are an object
(ToolArguments.OBJECT), string values verbatim and other values as JSON (`true`, `null`).

Quirk: the official template drops the reasoning of every assistant before the last user message and
silently drops any system message but the first, so appending a user or system turn rewrites or loses text.
Our template keeps every assistant's reasoning (`clear_thinking=False` pinned; the official template has no
switch) and renders a later system message as a system turn. It is used for every role set, tool-only
included: on tool-loop histories it renders byte-identically to the official one. Pinned by
tests/families/test_minimax.py (parity, append-only matrix, negative control).

Imports from tito: families.base, families.deviations, families.engine_recipe.
"""

from __future__ import annotations

import dataclasses

from tito.families.base import VALID_APPEND_ROLES, Family, FixedTemplate, Junction, ToolArguments
from tito.families.deviations import VERBATIM_ASSISTANT_CONTENT
from tito.families.engine_recipe import EngineRecipe, ParserNames

_MINIMAX_SPECIALS = ("]~!b[", "]~b]", "[e~[", "<think>", "</think>", "<minimax:tool_call>", "</minimax:tool_call>")
_MINIMAX_DEVIATIONS = (
    "reasoning of every assistant is kept (clear_thinking=False pinned; official: only after the last user "
    "message), so appending a user turn never rewrites history; clear_thinking=true renders exactly the "
    "official template on conversations without the differences below (test_flipped_kwarg_renders_the_official)",
    "a system message after the first renders as a `]~b]system` turn (official: silently dropped), so a "
    "mid-session system message can be appended and its text reaches the model",
    "a tool result after an assistant without tool calls renders (official raises), so a tool result may follow "
    "an injected assistant; a tool result with null content renders an empty response (official raises)",
    "an assistant with empty reasoning still renders `<think>\\n\\n</think>\\n\\n` (official: no block), because every "
    "generated turn starts inside the generation prompt's `<think>\\n`, so the prompt stays a prefix of the turn",
    "null content renders as empty (official: the text `None`, e.g. in every assistant that only calls tools), "
    "which is what the model sampled",
    VERBATIM_ASSISTANT_CONTENT,
)

MINIMAX_M25 = Family(
    name="minimax_m25",
    summary="MiniMax-M2.5 (MiniMaxAI/MiniMax-M2.5): always thinking, XML tool calls",
    fixed_template=FixedTemplate("minimax_m25.jinja", {"clear_thinking": False}, VALID_APPEND_ROLES),
    junction=Junction.NEWLINE_AFTER_STOP,
    end_of_turn="[e~[",
    stop_tokens=("[e~[",),
    assistant_opener="]~b]ai\n",
    output_format="minimax",
    special_tokens=_MINIMAX_SPECIALS,
    tool_arguments=ToolArguments.OBJECT,
    thinking_kwarg=None,
    official_template="minimax-m2.5.jinja",
    engine_recipe=EngineRecipe(ParserNames("minimax", "minimax-m2"), ParserNames("minimax_m2", "minimax_m2")),
    deviations=_MINIMAX_DEVIATIONS,
)

MINIMAX_M27 = dataclasses.replace(
    MINIMAX_M25,
    name="minimax_m27",
    summary="MiniMax-M2.7 (MiniMaxAI/MiniMax-M2.7): as M2.5, its own default identity line",
    fixed_template=FixedTemplate("minimax_m27.jinja", {"clear_thinking": False}, VALID_APPEND_ROLES),
    official_template="minimax-m2.7.jinja",
)
"""M2.7 differs from M2.5 only in the identity line its template writes when no system message names one."""

FAMILIES = (MINIMAX_M25, MINIMAX_M27)
