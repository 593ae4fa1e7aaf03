"""The default family claims only what a checkpoint's own template proves on the probe conversations."""

from __future__ import annotations

import dataclasses
import functools

import pytest

from tests.conftest import family_tokenizer, reference_path
from tito.conformance import run_matrix
from tito.errors import ConfigurationError
from tito.families import VALID_APPEND_ROLES, FixedTemplate, Junction, fixed_families, get_family
from tito.tokenizer import get_tito_tokenizer
from tito.tokenizer_loading import LocalTokenizer


def with_template(tokenizer: LocalTokenizer, template: str) -> LocalTokenizer:
    return LocalTokenizer(tokenizer.backend, template, dict(tokenizer.special_tokens_map))


def test_an_append_only_template_gets_every_role_and_passes_the_matrix(qwen3_tokenizer: LocalTokenizer) -> None:
    checkpoint = with_template(qwen3_tokenizer, get_family("qwen3").fixed_template.source())
    family = get_tito_tokenizer(checkpoint, "default").family
    assert family.supported_roles == VALID_APPEND_ROLES
    assert (family.end_of_turn, family.junction) == ("<|im_end|>", Junction.NEWLINE_AFTER_STOP)
    assert family.assistant_opener == "<|im_start|>assistant\n"
    failed = [r for r in run_matrix(checkpoint, "default", max_sequence_length=2) if not r.passed]
    assert not failed, failed[:3]


def test_the_official_qwen3_template_loses_the_roles_that_drop_earlier_reasoning(
    qwen3_tokenizer: LocalTokenizer,
) -> None:
    """Official Qwen3 drops reasoning before the last user query: a user turn rewrites history (thinking on); it
    splits an injected assistant's content on quoted think tags, losing text; with thinking off it drops an earlier
    empty think block, so every role rewrites it."""
    checkpoint = with_template(qwen3_tokenizer, reference_path("templates", "qwen3.jinja").read_text(encoding="utf-8"))
    thinking = get_tito_tokenizer(checkpoint, "default").family
    assert thinking.supported_roles == ("tool", "system")
    assert thinking.probe_report is not None
    assert thinking.probe_report.describe("user") == "after a chat history appending it rewrites the earlier render"
    assert (
        thinking.probe_report.describe("assistant") == "after a chat history its content does not appear in the render"
    )
    plain = get_tito_tokenizer(checkpoint, "default", {"enable_thinking": False}).family
    assert plain.supported_roles == ()
    assert plain.probe_report is not None
    assert all("rewrites the earlier render" in plain.probe_report.describe(role) for role in VALID_APPEND_ROLES)
    with pytest.raises(ConfigurationError, match="does not support appending"):
        get_tito_tokenizer(checkpoint, "default", {"enable_thinking": False}, allowed_append_roles=["tool"])


@functools.cache
def _builtin_tokenizer(family: str) -> LocalTokenizer:
    tokenizer = family_tokenizer(family)
    assert isinstance(tokenizer, LocalTokenizer)
    return tokenizer


def _official_checkpoints() -> list[tuple[str, bool | None]]:
    return [
        (name, mode)
        for name in fixed_families()
        if get_family(name).official_template
        for mode in ([True, False] if get_family(name).thinking_kwarg else [None])
    ]


@pytest.mark.parametrize(("family", "thinking"), _official_checkpoints())
def test_the_probe_and_the_full_matrix_agree_on_every_official_template(family: str, thinking: bool | None) -> None:
    """Every cut appending only probe-claimed roles passes the matrix, and every role the probe refuses breaks a
    cut that appends it among claimed roles. A template without an end-of-turn token (GLM) is refused outright."""
    declared = get_family(family)
    tokenizer = _builtin_tokenizer(family)
    assert declared.official_template is not None
    official = reference_path("templates", declared.official_template).read_text(encoding="utf-8")
    checkpoint = with_template(tokenizer, official)
    kwargs = {} if thinking is None else {declared.thinking_kwarg or "": thinking}
    if declared.junction is Junction.STOP_IS_NEXT_OPENER:
        with pytest.raises(ConfigurationError, match="atomic end-of-turn token"):
            get_tito_tokenizer(checkpoint, "default", kwargs)
        return
    probed = get_tito_tokenizer(checkpoint, "default", kwargs).family
    claimed = dataclasses.replace(probed, fixed_template=FixedTemplate(None, {}, VALID_APPEND_ROLES))
    results = run_matrix(checkpoint, claimed, kwargs, max_sequence_length=2)
    supported = set(probed.supported_roles)
    unsound = [r for r in results if not r.passed and set(r.appended_roles) <= supported]
    assert not unsound, unsound[:3]
    for role in set(VALID_APPEND_ROLES) - supported:
        assert any(
            not r.passed and role in r.appended_roles and set(r.appended_roles) <= supported | {role} for r in results
        ), f"the probe refuses {role!r} ({probed.probe_report}), but the matrix passes every cut appending it"


def test_a_role_the_template_refuses_is_not_claimed(qwen3_tokenizer: LocalTokenizer) -> None:
    template = (
        get_family("qwen3")
        .fixed_template.source()
        .replace(
            "{%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}",
            "{%- if message.role == 'system' and not loop.first %}{{ raise_exception('no mid-session system') }}"
            "{%- elif message.role == 'user' %}",
        )
    )
    family = get_tito_tokenizer(with_template(qwen3_tokenizer, template), "default").family
    assert "system" not in family.supported_roles and "user" in family.supported_roles
    assert family.probe_report is not None
    assert "no mid-session system" in family.probe_report.describe("system")


def test_a_template_without_an_atomic_end_of_turn_is_refused(qwen3_tokenizer: LocalTokenizer) -> None:
    template = (
        "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant: {% endif %}"
    )
    with pytest.raises(ConfigurationError, match="atomic end-of-turn token"):
        get_tito_tokenizer(with_template(qwen3_tokenizer, template), "default")


def test_a_tokenizer_without_a_chat_template_is_refused(qwen3_tokenizer: LocalTokenizer) -> None:
    with pytest.raises(ConfigurationError, match="has none"):
        get_tito_tokenizer(qwen3_tokenizer, "default")
