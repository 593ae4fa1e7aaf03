"""The `<invoke name="N"><parameter name="K">V</parameter></invoke>` grammar shared by MiniMax and DeepSeek.

MiniMax writes the tags as plain text inside its atomic `<minimax:tool_call>` section; DeepSeek
V3.2/V4 (DSML) put the atomic `｜DSML｜` token after each `<` and `</` and add `string="true|false"`
to every parameter, which then decides the type instead of the schema.

Imports from tito: parsing.arguments, parsing.grammar, parsing.parameters, parsing.result.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from tito.parsing.arguments import ArgumentError, ToolIndex
from tito.parsing.grammar import Attempt
from tito.parsing.parameters import Parameter, parameter_call
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
        return parameter_call(raw, name, self._parameters(body), tools)

    def _parameters(self, body: str) -> Iterator[Parameter]:
        position = 0
        while body[position:].strip():
            parameter = self.parameter.match(body, position)
            if parameter is None:
                raise ArgumentError(f"unexpected text: {body[position:][:60]!r}")
            is_string = parameter.group(3)
            yield Parameter(
                parameter.group(2).strip(), parameter.group(4), None if is_string is None else is_string == "true"
            )
            position = parameter.end()
