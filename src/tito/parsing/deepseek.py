"""DeepSeek V3.2 and V4 output: `R</think>C\\n\\n<｜DSML｜tool_calls>...` (V3.2: `function_calls`).

Evidence: the reference encoders (encoding_dsv32 / encoding_dsv4) write reasoning and content
verbatim, then `\\n\\n` and a DSML block of invokes whose parameters say `string="true|false"`. Only
`｜DSML｜` is an atomic token: the `<`, `</` and tag names around it are text, matched around its
sentinel.

Imports from tito: parsing.arguments, parsing.grammar, parsing.invoke.
"""

from __future__ import annotations

from tito.parsing.arguments import ToolIndex
from tito.parsing.grammar import THINK_CLOSE, THINK_OPEN, Body, OutputFormat
from tito.parsing.invoke import InvokeGrammar

DSML = "｜DSML｜"


class DeepSeekDsml(OutputFormat):
    name = "deepseekv4"
    block = "tool_calls"
    markers = (THINK_OPEN, THINK_CLOSE, DSML)
    reasoning_strip = ""
    content_strip = ""
    call_end_text = "invoke>"

    def __init__(self) -> None:
        super().__init__()
        dsml = self.mark(DSML)
        self.grammar = InvokeGrammar(dsml)
        self.block_open = f"<{dsml}{self.block}>"
        self.block_close = f"</{dsml}{self.block}>"

    @property
    def openers(self) -> tuple[str, ...]:
        return (self.block_open,)

    def may_decide(self, body: str, appended: int) -> bool:
        """`｜DSML｜` starts every tag: only the text closing an invoke decides a call."""
        end = self.call_end_text
        return end in body[len(body) - appended - len(end) + 1 :]

    def parse_body(self, text: str, tools: ToolIndex) -> Body:
        start = text.find(self.block_open)
        if start < 0:
            return self.content_only(text)
        content = text[:start].removesuffix("\n\n")
        section = text[start + len(self.block_open) :]
        section, _, after = section.partition(self.block_close)
        return Body(self.join_content([content, after]), self.grammar.parse(section, tools))


class DeepSeekV32Dsml(DeepSeekDsml):
    name = "deepseekv32"
    block = "function_calls"
