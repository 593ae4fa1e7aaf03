"""`tito serve` as users run it: a real process on 127.0.0.1 and a free port, stopped by its own handle; and its
options, read in process with the serving step replaced."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import tito.server.commands.running
from tito.cli import main
from tito.engine_args import STREAM_IDS
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
    # stderr is not read here: a pipe would fill with access-log lines and block the server mid-burst
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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
    monkeypatch.setattr(tito.server.commands.running, "serve_on_socket", lambda app, sock, **kwargs: served.append(app))
    picker = "tito.trajectory.picking:drop_superseded_retries"
    assert main(["serve", "--engine", "instant", "--family", "qwen3", "--trajectory", "tree", "--strict-append-only",
                 "--max-nodes", "5", "--sample-picker", picker]) == 0  # fmt: skip
    options = served[0].state.tito.options
    assert (options.trajectory, options.strict_append_only, options.max_nodes) == (TrajectoryKind.TREE, True, 5)
    assert (options.sample_picker, options.sample_postprocessor) == (picker, None)


def test_the_matcher_option_is_each_sessions_default_and_harness_unless_given(monkeypatch: pytest.MonkeyPatch) -> None:
    served: list[Any] = []
    monkeypatch.setattr(tito.server.commands.running, "serve_on_socket", lambda app, sock, **kwargs: served.append(app))
    assert main(["serve", "--engine", "instant", "--family", "qwen3"]) == 0
    assert main(["serve", "--engine", "instant", "--family", "qwen3", "--matcher", "strict"]) == 0
    assert [app.state.tito.options.matcher for app in served] == ["harness", "strict"]


def test_a_sample_hook_that_cannot_load_stops_tito_serve_before_it_serves(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    served: list[Any] = []
    monkeypatch.setattr(tito.server.commands.running, "serve_on_socket", lambda app, sock, **kwargs: served.append(app))
    assert main(["serve", "--engine", "instant", "--family", "qwen3", "--sample-postprocessor", "my_hooks"]) == 1
    assert "--sample-postprocessor 'my_hooks': expected 'module:function'" in capsys.readouterr().err
    assert served == []


def _banner_port(process: subprocess.Popen[str]) -> int:
    """The port `tito serve` announces in its "agents use base_url" line (read from its stderr)."""
    assert process.stderr is not None
    for line in process.stderr:
        if match := re.search(r"agents use base_url http://127\.0\.0\.1:(\d+)/sessions/<id>/v1", line):
            return int(match.group(1))
    raise AssertionError(f"tito serve ended without its banner (exit {process.wait(10)})")


def _stop(process: subprocess.Popen[str]) -> str:
    """Terminate the server this test started (by its handle) and return the rest of its stderr."""
    process.terminate()
    try:
        _, err = process.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        _, err = process.communicate(timeout=10)
    return err


def test_with_port_0_the_banner_names_the_bound_port_and_each_request_is_one_access_log_line() -> None:
    command = [sys.executable, "-m", "tito.cli", "serve", "--engine", "instant", "--family", "qwen3", "--port", "0"]
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        base = f"http://127.0.0.1:{_banner_port(process)}"
        session_id = httpx.post(f"{base}/sessions").json()["session_id"]
        turn = {"messages": [{"role": "user", "content": "hi"}]}
        reply = httpx.post(f"{base}/sessions/{session_id}/v1/chat/completions", json=turn).json()
        assert httpx.get(f"{base}/sessions/nope").status_code == 404
    finally:
        err = _stop(process)
    lines = [json.loads(line.split("tito.access: ", 1)[1]) for line in err.splitlines() if "tito.access: " in line]
    routes = [(line["method"], line["route"], line["status"]) for line in lines]
    assert routes == [
        ("POST", "/sessions", 200), ("POST", "/sessions/{id}/v1/chat/completions", 200), ("GET", "/sessions/{id}", 404)
    ]  # fmt: skip
    turn_line = lines[1]
    assert turn_line["session"] == session_id and lines[2]["session"] == "nope"
    usage = reply["usage"]
    assert (turn_line["prompt_tokens"], turn_line["output_tokens"]) == (
        usage["prompt_tokens"], usage["completion_tokens"]
    )  # fmt: skip
    assert turn_line["engine_ms"] >= 0 and turn_line["tito_ms"] > 0 and lines[0]["engine_ms"] is None


def test_a_busy_port_is_one_error_line_and_no_banner() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        command = [sys.executable, "-m", "tito.cli", "serve", "--engine", "instant", "--family", "qwen3",
                   "--port", str(port)]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(SRC)}
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in done.stderr
    assert "base_url" not in done.stderr and "Traceback" not in done.stderr


@pytest.fixture(autouse=True)
def _keep_tito_log_level() -> Iterator[None]:
    """`tito serve` in process sets the `tito` logger's level (--log-level); later tests get it back as it was."""
    logger = logging.getLogger("tito")
    level = logger.level
    yield
    logger.setLevel(level)


@pytest.fixture
def engines_asked(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """`tito serve` runs without serving, each engine it asks `create_engine` for recorded (kind and options) and
    given as an instant engine."""
    import tito.server.commands.launch
    from tito.engines.instant import InstantEngine

    asked: list[dict[str, Any]] = []

    def engine(kind: str, **kwargs: Any) -> InstantEngine:
        asked.append({"kind": kind, **kwargs})
        return InstantEngine(lambda request: (1,))

    monkeypatch.setattr(tito.server.commands.launch, "create_engine", engine)
    monkeypatch.setattr(tito.server.commands.running, "serve_on_socket", lambda app, sock, **kwargs: None)
    return asked


def test_threads_reach_the_local_engine_and_are_refused_for_an_engine_without_them(
    engines_asked: list[dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    asked = engines_asked
    argv = ["serve", "--family", "qwen3", "--tokenizer", "qwen3", "--model", str(tmp_path), "--port", "0"]
    assert main([*argv, "--threads", "1"]) == 0
    assert (asked[0]["kind"], asked[0]["threads"]) == ("local", 1)
    assert main([*argv, "--engine", "instant", "--threads", "1"]) == 2
    assert "--threads sets the local engine's CPU threads; --engine instant has none" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("option", "key", "default", "given", "taken", "refused", "why"),
    [
        ("--stream-interval-ms", "stream_interval", 0.05, "0", 0, "-5", "must be a finite number"),  # ms -> s
        ("--engine-stream-ids", "stream_ids", STREAM_IDS, "1", 1, "0", "must be 1 or more"),
    ],
)
def test_the_engine_stream_options_reach_the_engine_and_a_bad_value_is_refused(
    engines_asked: list[dict[str, Any]], capsys: pytest.CaptureFixture[str], option: str, key: str,
    default: float, given: str, taken: float, refused: str, why: str,
) -> None:  # fmt: skip
    asked = engines_asked
    argv = ["serve", "--family", "qwen3", "--engine", "sglang", "--engine-url", "http://127.0.0.1:9", "--port", "0"]
    assert main(argv) == 0
    assert asked[-1][key] == pytest.approx(default)
    assert main([*argv, option, given]) == 0
    assert asked[-1][key] == taken
    with pytest.raises(SystemExit) as stopped:
        main([*argv, option, refused])
    assert stopped.value.code == 2 and f"{option}: '{refused}' {why}" in capsys.readouterr().err


def test_tito_serve_holds_idle_connections_longer_than_clients_and_queues_a_burst(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A request sent on a connection the server is closing dies with a reset; clients drop an idle connection after
    their own expiry (httpx and the openai SDK: 5 s, aiohttp: 15 s), so tito serve holds it longer (uvicorn: 5 s)."""
    settings: list[dict[str, Any]] = []

    def record(config: Any) -> None:
        settings.append({"timeout_keep_alive": config.timeout_keep_alive, "backlog": config.backlog})

    monkeypatch.setattr(
        tito.server.commands.running.uvicorn.Server, "run", lambda server, sockets=None: record(server.config)
    )
    assert main(["serve", "--engine", "instant", "--family", "qwen3", "--port", "0"]) == 0
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
