"""The default family claims only what a checkpoint's own template proves on the probe conversations."""

from __future__ import annotations

import pytest

from tests.conftest import reference_path
from tito.conformance import run_matrix
from tito.errors import ConfigurationError
from tito.families import VALID_APPEND_ROLES, Junction, get_family
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


def test_a_template_that_rewrites_history_gets_no_role_and_says_why(qwen3_tokenizer: LocalTokenizer) -> None:
    official = reference_path("templates", "qwen3.jinja").read_text(encoding="utf-8")
    family = get_tito_tokenizer(with_template(qwen3_tokenizer, official), "default").family
    assert family.supported_roles == ()
    assert family.probe_report is not None
    assert all("rewrites the earlier render" in family.probe_report.describe(role) for role in VALID_APPEND_ROLES)
    with pytest.raises(ConfigurationError, match="does not support appending"):
        get_tito_tokenizer(with_template(qwen3_tokenizer, official), "default", allowed_append_roles=["user"])


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
