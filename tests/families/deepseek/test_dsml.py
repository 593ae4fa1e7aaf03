"""DSML tool-call markup: what each argument type looks like, and refusals that name the call."""

from __future__ import annotations

import pytest

from tito.errors import TemplateRenderError
from tito.families.deepseek.common import DSML
from tito.families.deepseek.dsml import invoke, parameter, tool_calls_block


def test_strings_are_verbatim_and_everything_else_is_json() -> None:
    assert parameter("q", 'a "b"') == f'<{DSML}parameter name="q" string="true">a "b"</{DSML}parameter>'
    assert parameter("n", [1, {"é": None}]) == (
        f'<{DSML}parameter name="n" string="false">[1, {{"é": null}}]</{DSML}parameter>'
    )


def test_json_text_and_object_arguments_render_the_same() -> None:
    as_object = {"function": {"name": "f", "arguments": {"a": 1, "b": "x"}}}
    as_text = {"function": {"name": "f", "arguments": '{"a":1,"b":"x"}'}}
    assert invoke("call", as_object) == invoke("call", as_text)


def test_block_wraps_the_invokes_after_a_blank_line() -> None:
    block = tool_calls_block(3, [{"function": {"name": "f", "arguments": {}}}], "tool_calls")
    assert block == f'\n\n<{DSML}tool_calls>\n<{DSML}invoke name="f">\n\n</{DSML}invoke>\n</{DSML}tool_calls>'


@pytest.mark.parametrize("arguments", ["[1, 2]", "not json", 7])
def test_arguments_that_are_not_an_object_are_refused_with_the_message_index(arguments: object) -> None:
    with pytest.raises(TemplateRenderError, match=r"message 3: tool_calls\[0\]"):
        tool_calls_block(3, [{"function": {"name": "f", "arguments": arguments}}], "function_calls")
