"""Sampled ids -> the OpenAI assistant message (reasoning, content, tool calls) for every family, whole or streamed.

The one way in is `TitoTokenizer.parse_completion` (and `TitoTokenizer.incremental_parser` for a stream);
`build_completion_parser` gives the tokenizer its parser. `Family.output_format` names the grammar
(registry.py). Modules: grammar.py (what a format parser reads), markers.py (ids -> marked text),
parameters.py (the parameter-format skeleton), pipeline.py (the whole parse), incremental.py (the stream).
Knows nothing of sessions. Imports from tito: errors, families.base, tokenizer_protocol, parsing (its modules).
"""

from __future__ import annotations

from tito.parsing.incremental import Delta, IncrementalParser, ToolCallDelta
from tito.parsing.pipeline import CompletionParser, build_completion_parser
from tito.parsing.registry import OUTPUT_FORMATS, get_output_format
from tito.parsing.result import CallStatus, FinishReason, ParseResult, ToolCallAttempt, ToolSchema

__all__ = [
    "OUTPUT_FORMATS",
    "CallStatus",
    "CompletionParser",
    "Delta",
    "FinishReason",
    "IncrementalParser",
    "ParseResult",
    "ToolCallAttempt",
    "ToolCallDelta",
    "ToolSchema",
    "build_completion_parser",
    "get_output_format",
]
