"""`tito serve --workers N`: the workers' own arguments, and a real supervisor with two workers (marked `crash`: ~10 s
of process starts; in the default run)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.engines.servers import free_port
from tito.cli import main
from tito.server.scaleout.workers import worker_argv

SRC = Path(__file__).resolve().parents[3] / "src"


def test_a_worker_gets_the_supervisors_options_but_its_own_port_name_and_shared_journal() -> None:
    argv = ["serve", "--workers", "4", "--port=9000", "--engine", "instant", "--journal", "/j", "--process-name", "x"]
    assert worker_argv(argv, 9003, "127.0.0.1:9003") == [
        "serve", "--engine", "instant", "--journal", "/j",
        "--port", "9003", "--process-name", "127.0.0.1:9003", "--journal-shared",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--workers", "2"], "--workers N needs --journal DIR"),
        (["--journal-shared"], "--journal-shared needs --journal DIR"),
        (["--workers", "0", "--journal", "j"], "--workers must be at least 1"),
    ],
)
def test_scale_out_options_without_what_they_need_are_usage_errors(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--engine", "instant", "--family", "qwen3", *argv]) == 2
    assert says in capsys.readouterr().err


@pytest.mark.crash
def test_tito_serve_workers_starts_each_worker_prints_their_nginx_config_and_stops_them(tmp_path: Path) -> None:
    port = free_port()
    while not all(_bindable(port + offset) for offset in (0, 1, 2)):
        port = free_port()
    command = [sys.executable, "-m", "tito", "serve", "--engine", "instant", "--family", "qwen3", "--workers", "2",
               "--port", str(port), "--journal", str(tmp_path / "journal")]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    errors = tmp_path / "stderr"  # the supervisor's and its workers': a failure shows why
    with errors.open("w") as stderr:
        supervisor = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, env=env, text=True)
    try:
        names = []
        for worker in (port + 1, port + 2):
            deadline = time.monotonic() + 90
            while True:
                try:
                    ready = httpx.get(f"http://127.0.0.1:{worker}/ready", timeout=2)
                    if ready.status_code == 200:
                        names.append(ready.headers["x-tito-process"])
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline and supervisor.poll() is None, (
                    f"the worker on port {worker} did not come up (supervisor exit: {supervisor.poll()}); its "
                    f"stderr ends: {errors.read_text()[-3000:]}"
                )
                time.sleep(0.1)
        assert names == [f"127.0.0.1:{port + 1}", f"127.0.0.1:{port + 2}"]
        os.kill(supervisor.pid, signal.SIGTERM)
        output, _ = supervisor.communicate(timeout=30)
        assert supervisor.returncode == 0
        assert f"server 127.0.0.1:{port + 1} max_fails=0;" in output and f"listen 127.0.0.1:{port};" in output
        for worker in (port + 1, port + 2):
            assert _in_use(worker) is False, "the workers stop with their supervisor"
        assert len(list((tmp_path / "journal" / "streams").iterdir())) == 2, "each worker writes its own stream"
    finally:
        if supervisor.poll() is None:  # a failed check: stop it as a user would, so it stops its workers too
            os.kill(supervisor.pid, signal.SIGTERM)
            try:
                supervisor.wait(30)
            except subprocess.TimeoutExpired:
                os.kill(supervisor.pid, signal.SIGKILL)
                supervisor.wait(10)


def _bindable(port: int) -> bool:
    """Whether a server could listen on the port now, as a worker binds it (an outgoing connection's local port
    or another server's is not)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _in_use(port: int) -> bool:
    try:
        httpx.get(f"http://127.0.0.1:{port}/", timeout=0.5)
    except httpx.TransportError:
        return False
    return True
