"""GLM-4.7 tool calls: `<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>...</tool_call>`.

Evidence: glm-4.7.jinja writes reasoning as `<think>R</think>` (stripped), content stripped, then the
calls back to back; string values verbatim, others as JSON. Every tag is an atomic GLM token, so
arguments are found by id; whitespace between tags (GLM-4.5 wrote newlines) is tolerated.

Imports from tito: parsing.arguments, parsing.grammar, parsing.parameters, parsing.qwen, parsing.result.
"""

from __future__ import annotations

from collections.abc import Iterator

from tito.parsing.arguments import ArgumentError, ToolIndex
from tito.parsing.grammar import THINK_CLOSE, THINK_OPEN, Attempt, Body, OutputFormat
from tito.parsing.parameters import Parameter, parameter_call
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
        key_open = self.mark(ARG_KEY_OPEN)
        head, _, rest = inner.partition(key_open)
        name = head.strip()
        if not name:
            return Attempt(CallStatus.MISSING_NAME, inner, detail="no function name after <tool_call>")
        pairs = rest.split(key_open) if key_open in inner else []
        return parameter_call(inner, name, self._parameters(pairs), tools)

    def _parameters(self, pairs: list[str]) -> Iterator[Parameter]:
        key_close, value_open, value_close = (self.mark(m) for m in (ARG_KEY_CLOSE, ARG_VALUE_OPEN, ARG_VALUE_CLOSE))
        for pair in pairs:
            key, found_key, after_key = pair.partition(key_close)
            between, found_value, after_value = after_key.partition(value_open)
            value, found_end, tail = after_value.partition(value_close)
            if not (found_key and found_value and found_end) or between.strip() or tail.strip():
                raise ArgumentError(f"malformed argument pair: {pair[:60]!r}")
            yield Parameter(key.strip(), value)
