"""tito's version: one number (pyproject's), the same from `tito.__version__`, `tito --version` and `python -m tito`."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import tito
from tito.cli import main

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT_VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


def test_dunder_version_is_the_pyproject_version() -> None:
    assert tito.__version__ == PYPROJECT_VERSION


def test_cli_version_flag_prints_the_version_and_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"tito {tito.__version__}"


def test_python_dash_m_tito_runs_the_command_line() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, "-m", "tito", "--version"], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"tito {PYPROJECT_VERSION}"
