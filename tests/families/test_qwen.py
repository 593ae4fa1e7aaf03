"""Qwen fixed templates equal the official ones where the official is append-only, and differ only as declared."""

from __future__ import annotations

import itertools

import pytest

from tito.conformance import TOOLS, shapes
from tito.families import get_family
from tito.rendering import render_template

from .rendering_helpers import fixed_template, messages_of, official, reference_template, renderer

QWEN_FAMILIES = ["qwen3", "qwennext", "qwen35"]
# The kwarg that returns each fixed template to the official behaviour (what the pinned value turns off).
OFFICIAL_MODE = {
    "qwen3": {"clear_thinking": True},
    "qwennext": {"clear_thinking": True},
    "qwen35": {"preserve_thinking": False},
}


def without_boolean_arguments(messages: list[dict]) -> list[dict]:
    """The messages with boolean tool-call arguments left out (Qwen3.5's official template writes Python's
    `True`, a declared deviation), as new dicts: the conformance shapes are shared by every test."""
    return [
        {
            **message,
            "tool_calls": [
                {**call, "function": {**call["function"], "arguments": without_booleans(call["function"]["arguments"])}}
                for call in message["tool_calls"]
            ],
        }
        if message.get("tool_calls")
        else message
        for message in messages
    ]  # fmt: skip


def without_booleans(arguments: dict | str) -> dict | str:
    """Arguments given as JSON text are rendered verbatim by both templates: only objects are filtered."""
    if isinstance(arguments, str):
        return arguments
    return {k: v for k, v in arguments.items() if not isinstance(v, bool)}


def canonical_loop() -> list[dict]:
    """System, one user query, tool calls and results, every assistant with non-empty reasoning."""
    return without_boolean_arguments(messages_of("parallel_tools"))


def renders(family: str, messages: list[dict], **kwargs: object) -> list[tuple[str, str]]:
    """(official, fixed) renders of normalised messages, as tito hands them to templates; the fixed template is
    given only `kwargs` (not its pinned kwargs), so its own defaults are what is compared."""
    theirs = official(family, **kwargs)
    ours = renderer(get_family(family).fixed_template.source(), family, **kwargs)
    return [
        (theirs(messages, tools, generation, **thinking), ours(messages, tools, generation, **thinking))
        for tools, generation, thinking in itertools.product(
            (None, TOOLS), (False, True), ({}, {"enable_thinking": False})
        )
    ]


@pytest.mark.parametrize("family", QWEN_FAMILIES)
def test_fixed_equals_official_on_the_canonical_agent_loop(family: str) -> None:
    for theirs, ours in renders(family, canonical_loop()):
        assert ours == theirs


@pytest.mark.parametrize("family", QWEN_FAMILIES)
def test_fixed_equals_official_on_first_turn_prompts(family: str) -> None:
    for shape in shapes():
        first_turn = messages_of(shape)[:2]
        for theirs, ours in renders(family, first_turn):
            assert ours == theirs


@pytest.mark.parametrize("family", QWEN_FAMILIES)
def test_with_reasoning_clearing_on_the_fixed_template_is_the_official_one(family: str) -> None:
    """The declared deviation is exactly the reasoning kept: flip the pinned kwarg and every shape matches."""
    for name in shapes():
        if family == "qwen35" and name == "mid_session_system":
            continue  # another declared deviation: the official template raises
        messages = without_boolean_arguments(messages_of(name)) if family == "qwen35" else messages_of(name)
        for theirs, ours in renders(family, messages, **OFFICIAL_MODE[family]):
            assert ours == theirs, name


def test_qwen35_renders_a_mid_session_system_message_where_the_official_raises() -> None:
    messages = messages_of("mid_session_system")
    ours = fixed_template("qwen35")
    assert "<|im_start|>system\nBudget: one more tool call.<|im_end|>\n" in render_template(ours, messages)
    theirs = reference_template("qwen3.5.jinja")
    with pytest.raises(Exception, match="System message must be at the beginning"):
        render_template(theirs, messages)


def test_qwen35_writes_json_spelling_for_non_string_parameters() -> None:
    call = {"function": {"name": "f", "arguments": {"flag": True, "none": None, "n": 2, "s": "true"}}}
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "", "tool_calls": [call]}]
    text = render_template(fixed_template("qwen35"), messages)
    for line in ("<parameter=flag>\ntrue\n", "<parameter=none>\nnull\n", "<parameter=n>\n2\n", "<parameter=s>\ntrue\n"):
        assert line in text


def test_qwen3_renders_string_arguments_verbatim_and_objects_as_json() -> None:
    spelled = '{"b":  1, "a": false}'
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": "f", "arguments": spelled}}, {"function": {"name": "g", "arguments": {"x": None}}},
        ]},
    ]  # fmt: skip
    text = render_template(fixed_template("qwen3"), messages)
    assert f'"arguments": {spelled}' in text
    assert '"arguments": {"x": null}' in text
