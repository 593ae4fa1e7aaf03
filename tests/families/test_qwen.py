"""Qwen fixed templates equal the official ones where the official is append-only, and differ only as declared."""

from __future__ import annotations

import pytest

from tests.conftest import reference_path
from tito.conformance import TOOLS, shapes
from tito.families import get_family
from tito.messages import normalize_messages
from tito.rendering import compile_template, render_template

QWEN_FAMILIES = ["qwen3", "qwennext", "qwen35"]
# The kwarg that returns each fixed template to the official behaviour (what the pinned value turns off).
OFFICIAL_MODE = {
    "qwen3": {"clear_thinking": True},
    "qwennext": {"clear_thinking": True},
    "qwen35": {"preserve_thinking": False},
}


def canonical_loop() -> list[dict]:
    """System, one user query, tool calls and results, every assistant with non-empty reasoning."""
    messages = [dict(turn.message) for turn in shapes()["parallel_tools"]]
    for message in messages:
        for call in message.get("tool_calls", []):  # Qwen3.5 official writes Python spelling for booleans
            call["function"]["arguments"] = {
                k: v for k, v in call["function"]["arguments"].items() if not isinstance(v, bool)
            }
    return messages


def renders(family: str, messages: list[dict], **kwargs: object) -> list[tuple[str, str]]:
    declared = get_family(family)
    messages = normalize_messages(messages, declared.tool_arguments)  # tito hands templates normalised messages
    official = compile_template(reference_path("templates", declared.official_template).read_text(encoding="utf-8"))
    fixed = compile_template(declared.fixed_template.source())
    pairs = []
    for tools in (None, TOOLS):
        for generation in (False, True):
            for thinking in ({}, {"enable_thinking": False}):
                pairs.append((render_template(official, messages, tools, generation, **thinking, **kwargs),
                              render_template(fixed, messages, tools, generation, **thinking, **kwargs)))  # fmt: skip
    return pairs


@pytest.mark.parametrize("family", QWEN_FAMILIES)
def test_fixed_equals_official_on_the_canonical_agent_loop(family: str) -> None:
    for official, fixed in renders(family, canonical_loop()):
        assert fixed == official


@pytest.mark.parametrize("family", QWEN_FAMILIES)
def test_fixed_equals_official_on_first_turn_prompts(family: str) -> None:
    for turns in shapes().values():
        first_turn = [dict(turn.message) for turn in turns[:2]]
        for official, fixed in renders(family, first_turn):
            assert fixed == official


@pytest.mark.parametrize("family", QWEN_FAMILIES)
def test_with_reasoning_clearing_on_the_fixed_template_is_the_official_one(family: str) -> None:
    """The declared deviation is exactly the reasoning kept: flip the pinned kwarg and every shape matches."""
    for name, turns in shapes().items():
        if family == "qwen35" and name in ("mid_session_system", "unicode_boolean_arguments"):
            continue  # the two other declared deviations: official raises / writes Python booleans
        messages = [dict(turn.message) for turn in turns]
        for official, fixed in renders(family, messages, **OFFICIAL_MODE[family]):
            assert fixed == official, name


def test_qwen35_renders_a_mid_session_system_message_where_the_official_raises() -> None:
    messages = [dict(turn.message) for turn in shapes()["mid_session_system"]]
    fixed = compile_template(get_family("qwen35").fixed_template.source())
    assert "<|im_start|>system\nBudget: one more tool call.<|im_end|>\n" in render_template(fixed, messages)
    official = compile_template(reference_path("templates", "qwen3.5.jinja").read_text(encoding="utf-8"))
    with pytest.raises(Exception, match="System message must be at the beginning"):
        render_template(official, messages)


def test_qwen35_writes_json_spelling_for_non_string_parameters() -> None:
    call = {"function": {"name": "f", "arguments": {"flag": True, "none": None, "n": 2, "s": "true"}}}
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "", "tool_calls": [call]}]
    text = render_template(compile_template(get_family("qwen35").fixed_template.source()), messages)
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
    text = render_template(compile_template(get_family("qwen3").fixed_template.source()), messages)
    assert f'"arguments": {spelled}' in text
    assert '"arguments": {"x": null}' in text
