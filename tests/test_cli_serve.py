"""`tito serve` as users run it: a real process on 127.0.0.1 and a free port, stopped by its own handle; and its
options, read in process with uvicorn replaced."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from tito.cli import main
from tito.trajectory.events import TrajectoryKind

SRC = Path(__file__).resolve().parents[1] / "src"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def instant_tito_serve(*options: str, headers: dict[str, str] | None = None) -> Iterator[str]:
    """`tito serve --engine instant --family qwen3 OPTIONS` on a free port until the block ends (stopped by its own
    handle); yields its base URL once /health answers."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    command = [sys.executable, "-m", "tito.cli", "serve", "--engine", "instant", "--family", "qwen3",
               "--port", str(port), *options]  # fmt: skip
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/health", headers=headers).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None and time.monotonic() < deadline, "tito serve did not start"
            time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def test_tito_serve_with_the_instant_engine_answers_a_session() -> None:
    headers = {"Authorization": "Bearer k"}
    with instant_tito_serve("--api-key", "k", headers=headers) as base:
        session_id = httpx.post(f"{base}/sessions", headers=headers).json()["session_id"]
        reply = httpx.post(f"{base}/sessions/{session_id}/v1/chat/completions", headers=headers,
                           json={"messages": [{"role": "user", "content": "hi"}]}).json()  # fmt: skip
        assert "instant engine" in reply["choices"][0]["message"]["content"]


def test_the_tree_options_become_the_servers_session_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    served: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: served.append(app))
    picker = "tito.trajectory.picking:drop_superseded_retries"
    assert main(["serve", "--engine", "instant", "--family", "qwen3", "--trajectory", "tree", "--strict-append-only",
                 "--max-nodes", "5", "--sample-picker", picker]) == 0  # fmt: skip
    options = served[0].state.tito.options
    assert (options.trajectory, options.strict_append_only, options.max_nodes) == (TrajectoryKind.TREE, True, 5)
    assert (options.sample_picker, options.sample_postprocessor) == (picker, None)


def test_a_sample_hook_that_cannot_load_stops_tito_serve_before_it_serves(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    served: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: served.append(app))
    assert main(["serve", "--engine", "instant", "--family", "qwen3", "--sample-postprocessor", "my_hooks"]) == 1
    assert "--sample-postprocessor 'my_hooks': expected 'module:function'" in capsys.readouterr().err
    assert served == []


def test_tito_serve_holds_idle_connections_longer_than_clients_and_queues_a_burst(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A request sent on a connection the server is closing dies with a reset; clients drop an idle connection after
    their own expiry (httpx and the openai SDK: 5 s, aiohttp: 15 s), so tito serve holds it longer (uvicorn: 5 s)."""
    settings: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: settings.append(kwargs))
    assert main(["serve", "--engine", "instant", "--family", "qwen3"]) == 0
    assert settings[0]["timeout_keep_alive"] > max(httpx.Limits().keepalive_expiry or 0, 15)
    assert settings[0]["backlog"] >= 1024


def test_a_burst_of_new_connections_to_tito_serve_each_gets_a_reply_never_a_reset() -> None:
    """256 concurrent POST /sessions, each on a new connection, then 256 concurrent requests over the other routes
    (a turn, a description, samples, health), each on a new connection: every one answered, none reset."""
    burst = 256
    with instant_tito_serve() as base:
        port = int(base.rsplit(":", 1)[1])
        session_id = httpx.post(f"{base}/sessions").json()["session_id"]
        chat = {"messages": [{"role": "user", "content": "hi"}]}
        routes: list[tuple[str, str, object]] = [
            ("POST", f"/sessions/{session_id}/v1/chat/completions", chat),
            ("GET", f"/sessions/{session_id}", None),
            ("POST", f"/sessions/{session_id}/samples", None),
            ("GET", "/health", None),
        ]

        async def send_all(requests: list[tuple[str, str, object]]) -> list[int | str]:
            """Each request on its own new connection, all at once (a bare asyncio client: httpx's own cost per new
            connection would make this test slow); the reply's status, or the error that took its place."""

            async def one(method: str, path: str, body: object) -> int | str:
                payload = json.dumps(body).encode() if body is not None else b""
                try:
                    reader, writer = await asyncio.open_connection("127.0.0.1", port)
                    writer.write(f"{method} {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                                 f"content-length: {len(payload)}\r\n\r\n".encode() + payload)  # fmt: skip
                    status_line = await reader.readuntil(b"\r\n")
                    writer.close()
                    return int(status_line.split()[1])
                except (OSError, asyncio.IncompleteReadError) as exc:
                    return f"{type(exc).__name__}: {exc}"

            return await asyncio.gather(*(one(*request) for request in requests))

        started = time.monotonic()
        assert asyncio.run(send_all([("POST", "/sessions", None)] * burst)) == [200] * burst
        mixed = asyncio.run(send_all([routes[i % len(routes)] for i in range(burst)]))
        assert all(isinstance(status, int) for status in mixed), [s for s in mixed if not isinstance(s, int)][:3]
        turn, describe, samples, health = ({mixed[i] for i in range(k, burst, len(routes))} for k in range(4))
        assert turn <= {200, 409}, turn  # concurrent turns on one session: one commits, the others are refused
        assert describe == health == {200}
        assert samples <= {200, 422}, samples  # 422 (no samples yet) until the first turn commits
        assert time.monotonic() - started < 60
