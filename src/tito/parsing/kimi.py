"""Kimi K2.5 / K2.6 tool calls: a section of `<|tool_call_begin|>ID<|tool_call_argument_begin|>JSON<|tool_call_end|>`.

Evidence: kimi-k2.5.jinja / kimi-k2.6.jinja write `<think>R</think>C` verbatim (no stripping), then
`<|tool_calls_section_begin|>...<|tool_calls_section_end|>`; the call id is `functions.NAME:INDEX`
and carries the name. Arguments are JSON text, kept exactly as sampled; the id is kept too, since
the template renders it back.

Imports from tito: parsing.arguments, parsing.grammar, parsing.result.
"""

from __future__ import annotations

import re
from dataclasses import replace

from tito.parsing.arguments import ArgumentError, ToolIndex, json_object
from tito.parsing.grammar import THINK_CLOSE, THINK_OPEN, Attempt, Body, OutputFormat, json_call, unknown_tool
from tito.parsing.result import CallStatus

SECTION_BEGIN, SECTION_END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
CALL_BEGIN, ARGUMENT_BEGIN, CALL_END = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"
_CALL_ID = re.compile(r"(?:functions\.)?(?P<name>.+?)(?::\d+)?")


class Kimi(OutputFormat):
    name = "kimi"
    markers = (THINK_OPEN, THINK_CLOSE, SECTION_BEGIN, SECTION_END, CALL_BEGIN, ARGUMENT_BEGIN, CALL_END)
    reasoning_strip = ""
    content_strip = ""

    def parse_body(self, text: str, tools: ToolIndex) -> Body:
        section_begin, section_end = self.mark(SECTION_BEGIN), self.mark(SECTION_END)
        call_begin = self.mark(CALL_BEGIN)
        # A call without its section opener still counts as a call (the section is a container only).
        starts = [i for i in (text.find(section_begin), text.find(call_begin)) if i >= 0]
        if not starts:
            return self.content_only(text)
        start = min(starts)
        content, section = text[:start], text[start:]
        if section.startswith(section_begin):
            section = section[1:]
        section, _, after = section.partition(section_end)
        pieces, blocks = self.split_blocks(section, CALL_BEGIN, CALL_END)
        attempts = [self.parse_call(inner, closed, tools) for inner, closed in blocks]
        return Body(self.join_content([content, *pieces, after]), attempts)

    def parse_call(self, inner: str, closed: bool, tools: ToolIndex) -> Attempt:
        if not closed:
            return Attempt(CallStatus.UNCLOSED, inner, detail="no <|tool_call_end|> before the completion ended")
        call_id, found, arguments = inner.partition(self.mark(ARGUMENT_BEGIN))
        call_id = call_id.strip()
        match = _CALL_ID.fullmatch(call_id)
        name = match.group("name") if match else ""
        if not found or not name:
            return Attempt(CallStatus.MISSING_NAME, inner, detail=f"no function name in the call id {call_id!r}")
        if not tools.knows(name):
            return unknown_tool(inner, name)
        try:
            values = json_object(arguments)
        except ArgumentError as exc:
            return Attempt(CallStatus.INVALID_ARGUMENTS, inner, name=name, detail=str(exc))
        return replace(json_call(inner, name, arguments, values, tools), call_id=call_id)
