"""The real-trainer tests (`-m trainers`): each trainer's package in its own venv (`.ci/run`'s trainers stage runs
each file in the venv that has its package). Collected only when the run selects `trainers`, so the default run
never imports a trainer."""

from __future__ import annotations

import re
from pathlib import Path

import pytest


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    selected = re.search(r"(?<!not )\btrainers\b", config.getoption("markexpr") or "")
    return None if selected else True
