"""The thinking switch: three spellings, one setting, one reading a server can forward to the engine."""

from __future__ import annotations

from typing import Any

import pytest

from tito.errors import ConfigurationError
from tito.families.deepseek import FAMILIES
from tito.families.deepseek.common import (
    DEFAULT_THINKING,
    THINKING_ALIASES,
    EncoderOptions,
    effective_thinking,
    merge_thinking_kwargs,
    with_tools,
)


@pytest.mark.parametrize("alias", THINKING_ALIASES)
@pytest.mark.parametrize("value", [True, False])
def test_every_alias_switches_thinking(alias: str, value: bool) -> None:
    assert effective_thinking({alias: value}) is value
    for family in FAMILIES:
        assert family.encoder is not None
        on = family.encoder([{"role": "user", "content": "q"}], None, True, {alias: value})
        assert on.endswith("<think>" if value else "</think>")


@pytest.mark.parametrize(("mode", "expected"), [("thinking", True), ("chat", False)])
def test_thinking_mode_takes_the_reference_encoders_words(mode: str, expected: bool) -> None:
    assert effective_thinking({"thinking_mode": mode}) is expected


def test_no_switch_means_the_engines_default_and_null_means_unset() -> None:
    assert effective_thinking({}) is DEFAULT_THINKING
    assert effective_thinking({"thinking": None, "enable_thinking": True}) is True


def test_disagreeing_aliases_name_both() -> None:
    with pytest.raises(ConfigurationError, match=r"thinking=True, enable_thinking=False"):
        effective_thinking({"thinking": True, "enable_thinking": False})
    assert effective_thinking({"thinking": True, "thinking_mode": "thinking"}) is True


@pytest.mark.parametrize("bad", [{"thinking": "yes"}, {"thinking_mode": "deep"}, {"enable_thinking": 1}])
def test_a_non_switch_value_is_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError, match="thinking switch"):
        effective_thinking(bad)


def test_a_request_that_sets_one_alias_replaces_the_others() -> None:
    session = {"enable_thinking": True, "reasoning_effort": "max"}
    merged = merge_thinking_kwargs(session, {"thinking_mode": "chat"})
    assert merged == {"thinking_mode": "chat", "reasoning_effort": "max"}
    assert effective_thinking(merged) is False
    assert merge_thinking_kwargs(session, {"other": 1}) == {**session, "other": 1}


def test_drop_thinking_must_be_a_boolean() -> None:
    with pytest.raises(ConfigurationError, match="drop_thinking"):
        EncoderOptions.from_kwargs({"drop_thinking": "no"})


def test_tools_go_on_the_leading_system_message_without_touching_the_callers() -> None:
    tools = [{"type": "function", "function": {"name": "f"}}]
    system = {"role": "system", "content": "S"}
    assert with_tools([system], tools) == [{**system, "tools": tools}] and "tools" not in system
    assert with_tools([{"role": "user", "content": "u"}], tools)[0] == {"role": "system", "content": "", "tools": tools}
    assert with_tools([system], None) == [system]
