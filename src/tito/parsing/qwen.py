"""Qwen tool-call formats: JSON inside `<tool_call>` (Qwen3, Qwen3-Thinking-2507) and XML parameters
inside `<tool_call>` (Qwen3.5, Qwen3.6, and Nemotron 3, which writes the same markup).

`<tool_call>`/`</tool_call>` and the think markers are atomic tokens in both Qwen vocabularies, so
calls are found by id; the inner `<function=...>`/`<parameter=...>` tags are ordinary text.

Imports from tito: parsing.arguments, parsing.grammar, parsing.parameters, parsing.result.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from tito.parsing.arguments import ArgumentError, ToolIndex, object_member_spans
from tito.parsing.grammar import THINK_CLOSE, THINK_OPEN, Attempt, Body, OutputFormat, json_call, unknown_tool
from tito.parsing.parameters import Parameter, parameter_call
from tito.parsing.result import CallStatus

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"


class QwenJson(OutputFormat):
    """`<think>\\nR\\n</think>\\n\\nC\\n<tool_call>\\n{"name": N, "arguments": A}\\n</tool_call>` (qwen3.jinja).

    `arguments` is the model's exact text of the value (the fixed template writes a string verbatim).
    """

    name = "qwen3_json"
    markers = (THINK_OPEN, THINK_CLOSE, TOOL_CALL_OPEN, TOOL_CALL_CLOSE)
    reasoning_strip = "\n"
    content_strip = "\n"

    def parse_body(self, text: str, tools: ToolIndex) -> Body:
        outside, blocks = self.split_blocks(text, TOOL_CALL_OPEN, TOOL_CALL_CLOSE)
        attempts = [self.parse_call(inner, closed, tools) for inner, closed in blocks]
        return Body(self.join_content(outside), attempts)

    def parse_call(self, inner: str, closed: bool, tools: ToolIndex) -> Attempt:
        if not closed:
            return Attempt(CallStatus.UNCLOSED, inner, detail="no </tool_call> before the completion ended")
        try:
            members = object_member_spans(inner)
        except ArgumentError as exc:
            match = _NAME_IN_BROKEN_JSON.search(inner)
            name = match.group(1) if match else None
            if name is None:
                return Attempt(CallStatus.MISSING_NAME, inner, detail=f"call body {exc}")
            if not tools.knows(name):
                return unknown_tool(inner, name)
            return Attempt(CallStatus.INVALID_ARGUMENTS, inner, name=name, detail=f"call body {exc}")
        name_member = members.get("name")
        if name_member is None or not isinstance(name_member[0], str) or not name_member[0]:
            return Attempt(CallStatus.MISSING_NAME, inner, detail='the call object has no string "name"')
        name = name_member[0]
        if not tools.knows(name):
            return unknown_tool(inner, name)
        arguments_member = members.get("arguments", members.get("parameters"))
        if arguments_member is None:
            return Attempt(CallStatus.OK, inner, name=name, arguments="{}")
        value, start, end = arguments_member
        if not isinstance(value, dict):
            return Attempt(CallStatus.INVALID_ARGUMENTS, inner, name=name, detail='"arguments" is not a JSON object')
        return json_call(inner, name, inner[start:end], value, tools)


_NAME_IN_BROKEN_JSON = re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.)+)"')


class QwenXml(OutputFormat):
    """`<tool_call>\\n<function=N>\\n<parameter=P>\\nV\\n</parameter>\\n</function>\\n</tool_call>`
    (qwen35.jinja; nemotron-3-nano.jinja writes the same, with `</think>\\n` instead of `</think>\\n\\n`).

    Values are typed by the tool schema and the object serialised with json.dumps (ensure_ascii=False).
    """

    name = "qwen3_xml"
    markers = (THINK_OPEN, THINK_CLOSE, TOOL_CALL_OPEN, TOOL_CALL_CLOSE)
    reasoning_strip = None
    content_strip = None

    def parse_body(self, text: str, tools: ToolIndex) -> Body:
        outside, blocks = self.split_blocks(text, TOOL_CALL_OPEN, TOOL_CALL_CLOSE)
        attempts = [parse_xml_call(inner, closed, tools) for inner, closed in blocks]
        return Body(self.join_content(outside), attempts)


_FUNCTION = re.compile(r"\s*<function=([^>\n]*)>\n?(.*?)(?:</function>\s*)?\Z", re.DOTALL)
_PARAMETER = re.compile(r"<parameter=([^>\n]*)>\n?(.*?)\n?</parameter>\s*", re.DOTALL)


def parse_xml_call(inner: str, closed: bool, tools: ToolIndex) -> Attempt:
    """One `<function=N>` block; each `<parameter=P>` value loses exactly one newline on either side."""
    if not closed:
        return Attempt(CallStatus.UNCLOSED, inner, detail="no </tool_call> before the completion ended")
    match = _FUNCTION.match(inner)
    name = match.group(1).strip() if match else ""
    if not match or not name:
        return Attempt(CallStatus.MISSING_NAME, inner, detail="no <function=NAME> in the call")
    return parameter_call(inner, name, _xml_parameters(match.group(2)), tools)


def _xml_parameters(body: str) -> Iterator[Parameter]:
    position = len(body) - len(body.lstrip())
    while position < len(body):
        parameter = _PARAMETER.match(body, position)
        if parameter is None:
            raise ArgumentError(f"unexpected text in the call: {body[position:][:60]!r}")
        yield Parameter(parameter.group(1).strip(), parameter.group(2))
        position = parameter.end()
