"""SGLang's own wire types (`sglang.api.v1.api_types` of the pinned sglang wheel), loaded from the file that
scripts/sglang_api_types.sh takes out of the wheel: the oracle for the in-test SGLang server's replies and for the
requests tito's SGLang client sends, so neither can drift from real SGLang while agreeing with the other."""

from __future__ import annotations

import importlib.util
import os
from functools import cache
from pathlib import Path
from types import ModuleType

from tests.conftest import REQUIRE_BINARIES, unavailable

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "sglang_api_types.sh"
VERSION = "0.5.23"


def _cached_file() -> Path:
    cache_dir = Path(os.environ.get("TITO_CACHE_DIR") or Path.home() / ".cache" / "tito")
    return cache_dir / "sglang-api" / VERSION / "sglang" / "api" / "v1" / "api_types.py"


@cache
def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("sglang_api_v1_types", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sglang_api_types() -> ModuleType:
    """The module, or the test skipped (failed under TITO_REQUIRE_BINARIES) with the command that fetches it."""
    path = _cached_file()
    if not path.exists():
        unavailable(f"SGLang's wire types are not cached at {path} (run `bash {SCRIPT}`)", REQUIRE_BINARIES)
    try:
        import msgspec  # noqa: F401  # the types are msgspec Structs
    except ImportError:
        unavailable('msgspec is not installed (pip install -e ".[test]")', REQUIRE_BINARIES)
    return _load(path)
