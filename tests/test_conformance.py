"""Every registered family passes the conformance matrix: the invariants of docs/architecture.md, per family.

The matrix runs on the family's real tokenizer where a registry package ships it, otherwise on a proxy
(Qwen3 vocabulary + the family's markers as special tokens), in the default per-role content modes (what
`tito verify` runs) and in each mode for every role (special-token text in content as control tokens, and as plain
text). Each matrix is computed once per session (tests.conftest.family_matrix). A negative control proves the
checks bite.
"""

from __future__ import annotations

import dataclasses

import pytest

from tests.conftest import family_matrix, family_tokenizer, reference_path
from tito.conformance import run_matrix
from tito.content_tokens import ContentMode
from tito.families import registry
from tito.families.base import Family, FixedTemplate
from tito.families.registry import fixed_families, get_family, list_families

FIXED_FAMILIES = fixed_families()
CONTENT_MODES: list[ContentMode | None] = [None, "control", "text"]
"""The default per-role modes (what `tito verify` and `tito serve` use unless told), and each mode for every role."""


def failures(family: str, *checks: str) -> list[str]:
    return [
        f"{mode} {r.shape} cut={r.cut} thinking={r.thinking} {r.check}: {r.detail}"
        for mode in CONTENT_MODES
        for r in family_matrix(family, mode)
        if not r.passed and (not checks or r.check in checks)
    ]


@pytest.mark.parametrize("family", FIXED_FAMILIES)
def test_render_of_history_is_a_byte_prefix_of_the_next_render(family: str) -> None:
    assert not failures(family, "append_only_text"), "Invariant 1 broken; see the family's fixed template"


@pytest.mark.parametrize("family", FIXED_FAMILIES)
def test_merge_tokens_equals_full_render_and_keeps_stored_ids(family: str) -> None:
    assert not failures(family, "merge_equals_full_render", "stored_ids_are_prefix", "no_error")


@pytest.mark.parametrize("family", FIXED_FAMILIES)
def test_merge_tokens_agrees_with_the_tokenizer_library_not_only_with_tito(family: str) -> None:
    """`merge_equals_full_render` compares with `tt.tokenize`, tito's own code in text mode; this oracle is not."""
    assert not failures(family, "tokenizer_agrees")


@pytest.mark.parametrize("family", FIXED_FAMILIES)
def test_appended_content_is_in_the_suffix_which_ends_with_the_opener(family: str) -> None:
    assert not failures(family, "appended_content_in_suffix", "suffix_ends_with_opener")


@pytest.mark.parametrize("family", FIXED_FAMILIES)
def test_generation_prompt_is_a_prefix_of_the_rendered_turn(family: str) -> None:
    assert not failures(family, "prompt_prefix_of_turn")


@pytest.mark.parametrize("family", FIXED_FAMILIES)
def test_matrix_covers_every_supported_role_and_thinking_mode(family: str) -> None:
    results = family_matrix(family, "text")
    appended = {role for r in results for role in r.appended_roles}
    assert appended == set(get_family(family).supported_roles)
    assert "quoted_markers" in {r.shape for r in results}, "content quoting every marker, in every role"
    expected_modes = {True, False} if get_family(family).thinking_kwarg else {None}
    assert {r.thinking for r in results} == expected_modes


def test_a_template_that_rewrites_history_fails_the_matrix(monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: the official Qwen3 template drops earlier reasoning, and the matrix must say so."""
    official = reference_path("templates", "qwen3.jinja").read_text(encoding="utf-8")
    qwen3 = get_family("qwen3")
    broken_template = FixedTemplate("qwen3.jinja", {}, qwen3.supported_roles)
    broken = dataclasses.replace(qwen3, name="qwen3_official", fixed_template=broken_template)
    monkeypatch.setattr(FixedTemplate, "source", lambda self: official)
    monkeypatch.setattr(registry, "FAMILIES", {**registry.FAMILIES, broken.name: broken})
    results = run_matrix(family_tokenizer("qwen3"), broken.name, max_sequence_length=1)
    failed_thinking = {r.shape for r in results if not r.passed and r.thinking}
    failed_not_thinking = {r.shape for r in results if not r.passed and r.thinking is False}
    assert "multi_user" in failed_thinking, "a new user query drops earlier reasoning in the official template"
    assert "single_tool" not in failed_thinking, "a reasoning tool loop is append-only even in the official template"
    assert "single_tool" in failed_not_thinking, "official drops an empty think block once the turn is not last"


def test_every_family_declares_a_valid_family_value() -> None:
    for name in list_families():
        assert isinstance(get_family(name), Family)
