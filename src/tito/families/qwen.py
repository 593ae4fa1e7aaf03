"""Qwen families: Qwen3 (hybrid thinking), Qwen3-Thinking-2507 / Qwen3-Next, Qwen3.5 (and 3.6).

Boundary fact (all three): the model stops at `<|im_end|>` (151645 / 248046), but the template writes
`<|im_end|>\\n`, so the junction inserts the `\\n` (Junction.NEWLINE_AFTER_STOP); pinned by
tests/test_tokenizer.py::test_merge_tokens_equals_full_render.

Imports from tito: families.base, families.deviations, families.engine_recipe.
"""

from __future__ import annotations

import dataclasses

from tito.families.base import VALID_APPEND_ROLES, Family, FixedTemplate, Junction, ToolArguments
from tito.families.deviations import VERBATIM_ASSISTANT_CONTENT
from tito.families.engine_recipe import EngineRecipe, ParserNames

_QWEN_STOPS = ("<|im_end|>", "<|endoftext|>")
_QWEN_STOP_CLOSING = {"<|endoftext|>": "<|im_end|>"}
"""`<|endoftext|>` ends a document, not a turn: the template never writes it, so tito closes the turn after it with
the template's `<|im_end|>` (prompt ids, loss mask 0) and the junction's `\\n` follows."""
_QWEN_SPECIALS = (
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
)

_KEEP_REASONING = (
    "reasoning of every assistant is kept (official: only after the last user query), so appending a user "
    "turn never rewrites history; the official behaviour returns with clear_thinking=true"
)
_EMPTY_THINK = (
    "an assistant with empty reasoning still renders `<think>\\n\\n</think>\\n\\n` when it is not last (official: "
    "drops it), because that is exactly what a thinking-off generation prompt made it sample"
)

QWEN3 = Family(
    name="qwen3",
    summary="Qwen3 hybrid-thinking checkpoints (Qwen/Qwen3-0.6B ... Qwen3-235B-A22B)",
    fixed_template=FixedTemplate("qwen3.jinja", {"clear_thinking": False}, VALID_APPEND_ROLES),
    junction=Junction.NEWLINE_AFTER_STOP,
    end_of_turn="<|im_end|>",
    stop_tokens=_QWEN_STOPS,
    stop_closing=_QWEN_STOP_CLOSING,
    assistant_opener="<|im_start|>assistant\n",
    output_format="qwen3_json",
    special_tokens=_QWEN_SPECIALS,
    official_template="qwen3.jinja",
    builtin_tokenizer="qwen3",
    engine_recipe=EngineRecipe(ParserNames("qwen3", "qwen25"), ParserNames("qwen3", "hermes")),
    deviations=(_KEEP_REASONING, _EMPTY_THINK, VERBATIM_ASSISTANT_CONTENT),
)

QWENNEXT = dataclasses.replace(
    QWEN3,
    name="qwennext",
    summary="Qwen3-Thinking-2507 (4B, 30B-A3B, 235B-A22B) and Qwen3-Next-80B-A3B-Thinking: always thinking",
    fixed_template=FixedTemplate("qwennext.jinja", {"clear_thinking": False}, VALID_APPEND_ROLES),
    thinking_kwarg=None,
    official_template="qwen3-thinking-2507.jinja",
    engine_recipe=EngineRecipe(ParserNames("qwen3-thinking", "qwen25"), ParserNames("qwen3", "hermes")),
)
"""As Qwen3, but the generation prompt always opens `<think>\\n` and there is no thinking switch."""

QWEN35 = Family(
    name="qwen35",
    summary="Qwen3.5 (4B ... 397B-A17B) and Qwen3.6 checkpoints: XML-parameter tool calls",
    fixed_template=FixedTemplate("qwen35.jinja", {"preserve_thinking": True}, VALID_APPEND_ROLES),
    junction=Junction.NEWLINE_AFTER_STOP,
    end_of_turn="<|im_end|>",
    stop_tokens=_QWEN_STOPS,
    stop_closing=_QWEN_STOP_CLOSING,
    assistant_opener="<|im_start|>assistant\n",
    output_format="qwen3_xml",
    special_tokens=_QWEN_SPECIALS,
    tool_arguments=ToolArguments.OBJECT,
    official_template="qwen3.5.jinja",
    builtin_tokenizer="qwen35",
    engine_recipe=EngineRecipe(ParserNames("qwen3", "qwen3_coder"), ParserNames("qwen3", "qwen3_coder")),
    deviations=(
        "reasoning of every assistant is kept (official Qwen3.5: only after the last user query; Qwen3.6 "
        "calls this preserve_thinking), so appending a user turn never rewrites history",
        "a system message after the first renders as a system turn (official: raises), so a mid-session "
        "system message can be appended",
        "non-string tool-call parameter values render as JSON (`true`, `null`); official Qwen3.5 writes "
        "Python's `True`/`None` (Qwen3.6 made the same fix)",
        "with reasoning kept, a conversation without a user query renders (official raises)",
        VERBATIM_ASSISTANT_CONTENT,
    ),
)

FAMILIES = (QWEN3, QWENNEXT, QWEN35)
