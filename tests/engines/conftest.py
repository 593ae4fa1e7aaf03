"""In-test SGLang and vLLM servers, started once per test session and reset before each test that uses them; the
connection pool's tests on both event loops."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping

import pytest
import uvloop

from tests.engines.fake_engine import FakeServer
from tests.engines.servers import start_fake


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    """The connection pool's tests run on asyncio's own loop and on uvloop (`tito serve`'s), whose transports
    differ; the others on asyncio's."""
    if item.path.name == "test_connections.py":
        return {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}
    return {"asyncio": asyncio.new_event_loop}


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
