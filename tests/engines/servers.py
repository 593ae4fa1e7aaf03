"""Run the in-test SGLang and vLLM servers under uvicorn on 127.0.0.1 (a free port), in a thread or a process.

Imported by tests/engines/conftest.py (threads, one per test session) and benchmarks/engines.py (a process, so the
client's timings do not share the server's interpreter).
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import uvicorn

from tests.engines.fake_engine import FakeServer
from tests.engines.fake_sglang import sglang_app
from tests.engines.fake_vllm import vllm_app


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServerThread:
    """uvicorn serving `app` on 127.0.0.1 in a daemon thread; `stop()` shuts it down (and waits, bounded)."""

    def __init__(self, app: Callable[..., Any], port: int | None = None) -> None:
        self.port = port or free_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="critical", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ServerThread:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"in-test server on port {self.port} did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)


def start_fake(kind: str) -> tuple[FakeServer, ServerThread]:
    server = FakeServer(name=kind)
    thread = ServerThread(sglang_app(server) if kind == "sglang" else vllm_app(server)).start()
    server.url = thread.url
    return server, thread


def main() -> None:
    """Serve one in-test engine in its own process (benchmarks): python -m tests.engines.servers sglang|vllm PORT."""
    kind, port = sys.argv[1], int(sys.argv[2])
    server = FakeServer(name=kind, url=f"http://127.0.0.1:{port}")
    app = sglang_app(server) if kind == "sglang" else vllm_app(server)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="critical", lifespan="off")


if __name__ == "__main__":
    main()
