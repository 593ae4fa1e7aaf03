"""The `<invoke name="N"><parameter name="K">V</parameter></invoke>` grammar shared by MiniMax and DeepSeek.

MiniMax writes the tags as plain text inside its atomic `<minimax:tool_call>` section; DeepSeek
V3.2/V4 (DSML) put the atomic `｜DSML｜` token after each `<` and `</` and add `string="true|false"`
to every parameter, which then decides the type instead of the schema.

Imports from tito: parsing.arguments, parsing.base, parsing.result.
"""

from __future__ import annotations

import json
import re

from tito.parsing.arguments import ArgumentError, ToolIndex, dump_arguments, typed_value
from tito.parsing.base import Attempt, unknown_tool
from tito.parsing.result import CallStatus


class InvokeGrammar:
    """Parses a run of invokes whose tags start with `<` + `prefix` (empty for MiniMax, the DSML sentinel)."""

    def __init__(self, prefix: str) -> None:
        p = re.escape(prefix)
        self.invoke_head = re.compile(rf"\s*<{p}invoke(?:\s+name=([\"']?)([^\"'>\n]*)\1)?\s*>\n?")
        self.invoke_end = re.compile(rf"\n?</{p}invoke>")
        self.parameter = re.compile(
            rf"\s*<{p}parameter\s+name=([\"']?)([^\"'>\n]*)\1(?:\s+string=\"(true|false)\")?\s*>(.*?)</{p}parameter>",
            re.DOTALL,
        )

    def parse(self, section: str, tools: ToolIndex) -> list[Attempt]:
        """Every invoke in `section`; an invoke cut before its end tag is UNCLOSED and ends the run."""
        attempts: list[Attempt] = []
        position = 0
        while section[position:].strip():
            head = self.invoke_head.match(section, position)
            if head is None:
                rest = section[position:]
                attempts.append(Attempt(CallStatus.MISSING_NAME, rest, detail=f"expected an invoke: {rest[:60]!r}"))
                break
            end = self.invoke_end.search(section, head.end())
            if end is None:
                raw = section[position:]
                attempts.append(Attempt(CallStatus.UNCLOSED, raw, detail="the invoke is not closed"))
                break
            raw = section[head.start() : end.end()].strip()
            attempts.append(self.parse_invoke(head.group(2), section[head.end() : end.start()], raw, tools))
            position = end.end()
        return attempts

    def parse_invoke(self, name: str | None, body: str, raw: str, tools: ToolIndex) -> Attempt:
        name = (name or "").strip()
        if not name:
            return Attempt(CallStatus.MISSING_NAME, raw, detail="the invoke has no name")
        if not tools.knows(name):
            return unknown_tool(raw, name)
        arguments: dict[str, object] = {}
        position = 0
        while body[position:].strip():
            parameter = self.parameter.match(body, position)
            if parameter is None:
                return Attempt(
                    CallStatus.INVALID_ARGUMENTS, raw, name=name, detail=f"unexpected text: {body[position:][:60]!r}"
                )
            key, is_string, value = parameter.group(2).strip(), parameter.group(3), parameter.group(4)
            if key in arguments:
                return Attempt(CallStatus.INVALID_ARGUMENTS, raw, name=name, detail=f"parameter {key!r} given twice")
            try:
                if is_string == "true":
                    arguments[key] = value
                elif is_string == "false":
                    arguments[key] = _json_value(value)
                else:
                    arguments[key] = typed_value(value, tools.parameter_schema(name, key))
            except ArgumentError as exc:
                return Attempt(CallStatus.INVALID_ARGUMENTS, raw, name=name, detail=f"parameter {key!r}: {exc}")
            position = parameter.end()
        return Attempt(CallStatus.OK, raw, name=name, arguments=dump_arguments(arguments))


def _json_value(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ArgumentError(f'string="false" but the text is not JSON: {exc}') from exc
