"""The real-agent suite's fixtures: a scratch directory per run (the agent's HOME and working directory) and
tito's log next to it."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """The agent's working directory (its tool writes here)."""
    path = tmp_path / "work"
    path.mkdir()
    return path
