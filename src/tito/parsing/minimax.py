"""MiniMax M2.5 / M2.7 tool calls: `<minimax:tool_call>` around invokes with plain-text tags.

Evidence: minimax-m2.5.jinja writes `<think>\\nR\\n</think>\\n\\n` + content + `\\n<minimax:tool_call>\\n`
+ one `<invoke name="N">\\n<parameter name="K">V</parameter>\\n...</invoke>\\n` per call +
`</minimax:tool_call>`; string values verbatim, others as JSON, so values are typed by the schema.

Imports from tito: parsing.arguments, parsing.grammar, parsing.invoke.
"""

from __future__ import annotations

from tito.parsing.arguments import ToolIndex
from tito.parsing.grammar import THINK_CLOSE, THINK_OPEN, Body, OutputFormat
from tito.parsing.invoke import InvokeGrammar

SECTION_OPEN, SECTION_CLOSE = "<minimax:tool_call>", "</minimax:tool_call>"


class MiniMax(OutputFormat):
    name = "minimax"
    markers = (THINK_OPEN, THINK_CLOSE, SECTION_OPEN, SECTION_CLOSE)
    reasoning_strip = "\n"
    content_strip = "\n"
    call_end_text = "invoke>"

    def __init__(self) -> None:
        super().__init__()
        self.grammar = InvokeGrammar("")

    def parse_body(self, text: str, tools: ToolIndex) -> Body:
        outside, sections = self.split_blocks(text, SECTION_OPEN, SECTION_CLOSE)
        attempts = [attempt for section, _ in sections for attempt in self.grammar.parse(section, tools)]
        return Body(self.join_content(outside), attempts)
