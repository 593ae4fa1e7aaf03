"""In-test SGLang and vLLM servers, started once per test session and reset before each test that uses them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.engines.fake_engine import FakeServer
from tests.engines.servers import start_fake


@pytest.fixture(scope="session")
def sglang_server_session() -> Iterator[FakeServer]:
    server, thread = start_fake("sglang")
    yield server
    thread.stop()


@pytest.fixture(scope="session")
def vllm_server_session() -> Iterator[FakeServer]:
    server, thread = start_fake("vllm")
    yield server
    thread.stop()


@pytest.fixture
def sglang_server(sglang_server_session: FakeServer) -> FakeServer:
    sglang_server_session.reset()
    return sglang_server_session


@pytest.fixture
def vllm_server(vllm_server_session: FakeServer) -> FakeServer:
    vllm_server_session.reset()
    return vllm_server_session
