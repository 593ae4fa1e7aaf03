"""The `default` family's output: content only, with a leading `<think>` block split off when present.

Imports from tito: parsing.arguments, parsing.grammar.
"""

from __future__ import annotations

from tito.parsing.arguments import ToolIndex
from tito.parsing.grammar import Body, OutputFormat


class Plain(OutputFormat):
    name = "plain"
    reasoning_strip = None
    content_strip = None

    def parse_body(self, text: str, tools: ToolIndex) -> Body:
        return self.content_only(text)
