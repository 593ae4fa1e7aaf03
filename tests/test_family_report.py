"""docs/families.md is what the registry and the conformance matrix say now."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import family_matrix
from tito.family_report import families_markdown, run_all

DOC = Path(__file__).resolve().parents[1] / "docs" / "families.md"


def test_families_doc_is_generated_from_the_registry_and_the_matrix() -> None:
    """The matrices `python -m tito.family_report` runs (default content modes), shared with test_conformance."""
    results = run_all(lambda name: [(r.appended_roles, r.thinking, r.passed) for r in family_matrix(name)])
    expected = families_markdown(results)
    assert DOC.read_text(encoding="utf-8") == expected, "regenerate: python -m tito.family_report > docs/families.md"


def test_an_unsupported_role_shows_as_not_claimed() -> None:
    results = {"qwen3": [(("tool",), True, True), (("tool",), False, False)]}
    text = families_markdown(results)
    assert "| `qwen3` | on | yes | — | — | — |" in text
    assert "| `qwen3` | off | **no** (1 failed) | — | — | — |" in text
