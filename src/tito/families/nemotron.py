"""Nemotron family: NVIDIA Nemotron 3 Nano (30B-A3B) and Super (120B-A12B).

Boundary fact: Qwen's ChatML boundary. The model stops at `<|im_end|>`, but the template writes `<|im_end|>\\n`
after every turn, so the junction inserts the `\\n` (Junction.NEWLINE_AFTER_STOP); pinned by
tests/families/test_nemotron.py::test_merge_tokens_equals_the_full_render. Tool calls use the Qwen3.5 XML markup
(`<tool_call>\\n<function=NAME>\\n<parameter=KEY>\\nVALUE\\n</parameter>\\n...`), hence the `qwen3_xml` parser and
arguments passed as objects.

Evidence: shared/reference/templates/nemotron-3-nano.jinja and nemotron-3-super.jinja (Super adds the
`low_effort` kwarg, nothing else).

Imports from tito: families.base, families.deviations, families.engine_recipe.
"""

from __future__ import annotations

from tito.families.base import VALID_APPEND_ROLES, Family, FixedTemplate, Junction, ToolArguments
from tito.families.deviations import VERBATIM_ASSISTANT_CONTENT
from tito.families.engine_recipe import EngineRecipe, ParserNames

NEMOTRON3 = Family(
    name="nemotron3",
    summary="NVIDIA Nemotron 3 Nano 30B-A3B and Super 120B-A12B: ChatML turns, XML-parameter tool calls",
    fixed_template=FixedTemplate("nemotron3.jinja", {"truncate_history_thinking": False}, VALID_APPEND_ROLES),
    junction=Junction.NEWLINE_AFTER_STOP,
    end_of_turn="<|im_end|>",
    stop_tokens=("<|im_end|>",),
    assistant_opener="<|im_start|>assistant\n",
    output_format="qwen3_xml",
    special_tokens=("<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>"),
    tool_arguments=ToolArguments.OBJECT,
    official_template="nemotron-3-nano.jinja",
    engine_recipe=EngineRecipe(ParserNames("nemotron_3", "qwen3_coder"), ParserNames("nemotron_v3", "qwen3_coder")),
    deviations=(
        "reasoning of every assistant is kept unless truncate_history_thinking is true (official default: "
        "dropped before the last user message), so appending a user turn never rewrites history; with "
        "truncate_history_thinking=true the official behaviour returns",
        "with thinking on and reasoning kept, an assistant with empty reasoning renders `<think>\\n\\n</think>\\n` "
        "before its content (official: `<think></think>`), which starts with the `<think>\\n` generation prompt it "
        "was sampled after, so the prompt the model saw is a prefix of its rendered turn",
        "non-string tool-call parameter values render as JSON (`true`, `false`, `null`); official writes "
        "Python's `True`/`False`/`None` (numbers, lists and objects render the same)",
        "with low_effort (Super) every user message carries `{reasoning effort: low}` (official: only the last "
        "one, which would move when a user turn is appended); equal to official with one user message",
        "null content renders as empty (official: the text `None`)",
        VERBATIM_ASSISTANT_CONTENT,
        "a tool result that opens the conversation still gets its `<|im_start|>user` opener (official: omitted)",
        "tool-call arguments given as JSON text raise with a clear message (official: fails on `items`); tito "
        "decodes them to an object first (ToolArguments.OBJECT)",
    ),
)

FAMILIES = (NEMOTRON3,)
