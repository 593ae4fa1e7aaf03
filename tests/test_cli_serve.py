"""`tito serve` as users run it: a real process on 127.0.0.1 and a free port, stopped by its own handle; and its
options, read in process with uvicorn replaced."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
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


def test_tito_serve_with_the_instant_engine_answers_a_session() -> None:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    command = [sys.executable, "-m", "tito.cli", "serve", "--engine", "instant", "--family", "qwen3",
               "--port", str(port), "--api-key", "k"]  # fmt: skip
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        base, headers = f"http://127.0.0.1:{port}", {"Authorization": "Bearer k"}
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/health", headers=headers).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None and time.monotonic() < deadline, "tito serve did not start"
            time.sleep(0.2)
        session_id = httpx.post(f"{base}/sessions", headers=headers).json()["session_id"]
        reply = httpx.post(f"{base}/sessions/{session_id}/v1/chat/completions", headers=headers,
                           json={"messages": [{"role": "user", "content": "hi"}]}).json()  # fmt: skip
        assert "instant engine" in reply["choices"][0]["message"]["content"]
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def test_the_tree_options_become_the_servers_session_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    served: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: served.append(app))
    picker = "tito.trajectory.picking:drop_superseded_retries"
    assert main(["serve", "--engine", "instant", "--family", "qwen3", "--trajectory", "tree", "--strict-append-only",
                 "--max-nodes", "5", "--sample-picker", picker]) == 0  # fmt: skip
    options = served[0].state.tito.options
    assert (options.trajectory, options.strict_append_only, options.max_nodes) == (TrajectoryKind.TREE, True, 5)
    assert (options.sample_picker, options.sample_postprocessor) == (picker, None)


def test_the_matcher_option_is_each_sessions_default_and_harness_unless_given(monkeypatch: pytest.MonkeyPatch) -> None:
    served: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: served.append(app))
    assert main(["serve", "--engine", "instant", "--family", "qwen3"]) == 0
    assert main(["serve", "--engine", "instant", "--family", "qwen3", "--matcher", "strict"]) == 0
    assert [app.state.tito.options.matcher for app in served] == ["harness", "strict"]


def test_a_sample_hook_that_cannot_load_stops_tito_serve_before_it_serves(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    served: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: served.append(app))
    assert main(["serve", "--engine", "instant", "--family", "qwen3", "--sample-postprocessor", "my_hooks"]) == 1
    assert "--sample-postprocessor 'my_hooks': expected 'module:function'" in capsys.readouterr().err
    assert served == []
