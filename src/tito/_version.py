"""tito's version: the installed package's metadata, else the version in the checkout's pyproject.toml.

Running from a checkout (`PYTHONPATH=src`) has no package metadata, so the pyproject beside `src/` is read;
one number, kept in pyproject only. Imports nothing from tito.
"""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

_PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def package_version() -> str:
    """The installed distribution's version, or the checkout's pyproject version, or "unknown" with neither."""
    try:
        return importlib.metadata.version("tito")
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        with _PYPROJECT.open("rb") as file:
            return str(tomllib.load(file)["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "unknown"
