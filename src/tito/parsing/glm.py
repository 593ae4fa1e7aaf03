"""GLM-4.7 tool calls: `<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>...</tool_call>`.

Evidence: glm-4.7.jinja writes reasoning as `<think>R</think>` (stripped), content stripped, then the
calls back to back; string values verbatim, others as JSON. Every tag is an atomic GLM token, so
arguments are found by id; whitespace between tags (GLM-4.5 wrote newlines) is tolerated.

Imports from tito: parsing.arguments, parsing.base, parsing.qwen, parsing.result.
"""

from __future__ import annotations

from tito.parsing.arguments import ArgumentError, ToolIndex, dump_arguments, typed_value
from tito.parsing.base import THINK_CLOSE, THINK_OPEN, Attempt, Body, OutputFormat, unknown_tool
from tito.parsing.qwen import TOOL_CALL_CLOSE, TOOL_CALL_OPEN
from tito.parsing.result import CallStatus

ARG_KEY_OPEN, ARG_KEY_CLOSE = "<arg_key>", "</arg_key>"
ARG_VALUE_OPEN, ARG_VALUE_CLOSE = "<arg_value>", "</arg_value>"


class Glm47(OutputFormat):
    name = "glm47"
    markers = (
        THINK_OPEN,
        THINK_CLOSE,
        TOOL_CALL_OPEN,
        TOOL_CALL_CLOSE,
        ARG_KEY_OPEN,
        ARG_KEY_CLOSE,
        ARG_VALUE_OPEN,
        ARG_VALUE_CLOSE,
    )
    reasoning_strip = None
    content_strip = None

    def parse_body(self, text: str, tools: ToolIndex) -> Body:
        outside, blocks = self.split_blocks(text, TOOL_CALL_OPEN, TOOL_CALL_CLOSE)
        return Body(self.join_content(outside), [self.parse_call(inner, closed, tools) for inner, closed in blocks])

    def parse_call(self, inner: str, closed: bool, tools: ToolIndex) -> Attempt:
        if not closed:
            return Attempt(CallStatus.UNCLOSED, inner, detail="no </tool_call> before the completion ended")
        key_open, key_close = self.mark(ARG_KEY_OPEN), self.mark(ARG_KEY_CLOSE)
        value_open, value_close = self.mark(ARG_VALUE_OPEN), self.mark(ARG_VALUE_CLOSE)
        head, _, rest = inner.partition(key_open)
        name = head.strip()
        if not name:
            return Attempt(CallStatus.MISSING_NAME, inner, detail="no function name after <tool_call>")
        if not tools.knows(name):
            return unknown_tool(inner, name)
        arguments: dict[str, object] = {}
        pairs = rest.split(key_open) if key_open in inner else []
        for pair in pairs:
            key, found_key, after_key = pair.partition(key_close)
            between, found_value, after_value = after_key.partition(value_open)
            value, found_end, tail = after_value.partition(value_close)
            if not (found_key and found_value and found_end) or between.strip() or tail.strip():
                return Attempt(
                    CallStatus.INVALID_ARGUMENTS, inner, name=name, detail=f"malformed argument pair: {pair[:60]!r}"
                )
            key = key.strip()
            if key in arguments:
                return Attempt(CallStatus.INVALID_ARGUMENTS, inner, name=name, detail=f"argument {key!r} given twice")
            try:
                arguments[key] = typed_value(value, tools.parameter_schema(name, key))
            except ArgumentError as exc:
                return Attempt(CallStatus.INVALID_ARGUMENTS, inner, name=name, detail=f"argument {key!r}: {exc}")
        return Attempt(CallStatus.OK, inner, name=name, arguments=dump_arguments(arguments))
