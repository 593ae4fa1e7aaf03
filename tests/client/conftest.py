"""Client fixtures: real tito servers (uvicorn on 127.0.0.1, the scripted instant engine of tests/server), and
sockets that refuse or never answer, for the deadline tests."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

import pytest

from tests.server.conftest import Server, running_server
from tito.tokenizer_loading import LocalTokenizer


@pytest.fixture(scope="module")
def server(qwen3_tokenizer: LocalTokenizer) -> Iterator[Server]:
    with running_server(qwen3_tokenizer) as running:
        yield running


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A listening socket that never accepts: connections queue in its backlog and no reply ever comes."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    with contextlib.closing(sock):
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
def refused_url() -> Iterator[str]:
    """A bound port that never listens: every connection is refused."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    with contextlib.closing(sock):
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
