"""Sampled ids -> the OpenAI assistant message (reasoning, content, tool calls) for every family.

`parse_completion` is the one entry point; `Family.output_format` names the grammar (registry.py).
Knows nothing of sessions. Imports from tito: errors, families.base, tokenizer_loading, parsing (its modules).
"""

from __future__ import annotations

from collections.abc import Sequence

from tito.families.base import Family
from tito.parsing.base import CompletionParser, parser_for
from tito.parsing.registry import OUTPUT_FORMATS, get_output_format
from tito.parsing.result import CallStatus, FinishReason, ParseResult, ToolCallAttempt, ToolSchema
from tito.tokenizer_loading import Tokenizer

__all__ = [
    "OUTPUT_FORMATS",
    "CallStatus",
    "CompletionParser",
    "FinishReason",
    "ParseResult",
    "ToolCallAttempt",
    "get_completion_parser",
    "parse_completion",
]


def get_completion_parser(family: Family, tokenizer: Tokenizer) -> CompletionParser:
    """The family's parser bound to `tokenizer`, its special-token ids resolved once and cached."""
    return parser_for(get_output_format(family.output_format), family, tokenizer)


def parse_completion(
    family: Family,
    tokenizer: Tokenizer,
    completion_ids: Sequence[int],
    prompt_ids: Sequence[int] | None = None,
    tools: Sequence[ToolSchema] | None = None,
) -> ParseResult:
    """Parse one completion (the ids sampled after the generation prompt, through the stop token).

    `prompt_ids` tell whether the generation prompt already opened a reasoning block (Qwen3.5,
    Qwen3-Thinking-2507, ...); without them a closing `</think>` in the completion implies it. `tools`
    are the request's tool schemas: they type parameter values and flag unknown tool names. Never
    raises on malformed output: each tool-call attempt carries its status.
    """
    return get_completion_parser(family, tokenizer).parse(completion_ids, prompt_ids, tools)
