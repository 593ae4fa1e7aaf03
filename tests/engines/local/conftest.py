"""Session-scoped local engines: the seeded tiny Qwen3 on the real Qwen3 vocabulary, and SmolLM2 (converted once).

One torch thread: on a loaded shared machine a 2-thread team waits on a descheduled thread at every op (10x slower).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tito.engines.local import LocalEngine, build_tiny_model, default_model_dir
from tito.errors import ConfigurationError
from tito.tokenizer_loading import LocalTokenizer


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory, qwen3_tokenizer: LocalTokenizer) -> Path:
    return build_tiny_model(qwen3_tokenizer, tmp_path_factory.mktemp("tiny-qwen3"), seed=0)


@pytest.fixture(scope="session")
def tiny_engine(tiny_model_dir: Path, qwen3_tokenizer: LocalTokenizer) -> Iterator[LocalEngine]:
    engine = LocalEngine.from_model_dir(tiny_model_dir, decode=qwen3_tokenizer.decode, threads=1)
    yield engine
    asyncio.run(engine.aclose())


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    try:
        return default_model_dir()
    except ConfigurationError as exc:
        pytest.skip(f"SmolLM2 is not installed: {exc}")


@pytest.fixture(scope="session")
def smollm2_engine(smollm2_dir: Path) -> Iterator[LocalEngine]:
    engine = LocalEngine.from_model_dir(smollm2_dir, threads=1)
    yield engine
    asyncio.run(engine.aclose())
