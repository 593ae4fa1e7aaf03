"""Crash tests: `tito serve --journal` killed with SIGKILL at random points, restarted on the same journal, and every
session continued by the same agent, against the instant engine with a per-token delay (loopback only).

Kill points: between turns (right after a reply arrived), mid-engine-call (the reply is being generated), and
mid-journal-write (killed mid-call, then a record torn in half at the journal's tail, which is what a kill inside
the record's write leaves). After every restart each session holds exactly the turns whose replies its agent
received (none lost, none half-present), and at the end every session's samples equal an uninterrupted run's bit
for bit (session ids aside): the samples hold every prompt's ids, so every prompt after a restart was token-exact.
Seeded: TITO_CRASH_SEED picks other kill points. Marked `crash` (~15 s, a server start per kill; in the default run).
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.server.journal_agent import Agent, comparable, samples_of, stored_response_ids
from tito.journal.framing import RECORD_HEADER, SegmentReader
from tito.journal.segments import list_segments

pytestmark = pytest.mark.crash

SRC = Path(__file__).resolve().parents[2] / "src"
TOKEN_DELAY = 0.004
"""Seconds per reply id: the instant engine's ~20-id reply takes ~80 ms, a window to kill the server in."""
AGENTS, TURNS = 3, 5
KILLS = ("between", "mid_engine", "mid_write", "mid_engine", "between")


class ServeProcess:
    """`python -m tito serve --engine instant [--journal DIR]` on a free loopback port; stopped by its own pid."""

    def __init__(self, journal: Path | None, log: Path, token_delay: float = TOKEN_DELAY) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        command = [sys.executable, "-m", "tito", "serve", "--engine", "instant", "--family", "qwen3", "--port",
                   str(port), "--instant-token-delay", str(token_delay)]  # fmt: skip
        if journal is not None:
            command += ["--journal", str(journal)]
        self.url = f"http://127.0.0.1:{port}"
        self.log = log
        with log.open("ab") as output:
            env = {**os.environ, "PYTHONPATH": str(SRC)}
            self.process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=env)
        self.http = httpx.Client(base_url=self.url, timeout=10)
        deadline = time.monotonic() + 60
        while True:
            try:
                if self.http.get("/health").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"tito serve did not come up; its log:\n{log.read_text()}")
            time.sleep(0.05)

    def kill(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)
        self.http.close()

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        finally:
            self.kill()


def kill_mid_turn(server: ServeProcess, agent: Agent) -> None:
    """Send the agent's turn and kill the server halfway through the engine's reply; the agent gets no reply."""
    body = agent.request_body()
    thread = threading.Thread(target=_post_ignoring_errors, args=(server.http, agent.chat_path, body))
    thread.start()
    time.sleep(TOKEN_DELAY * 10)
    server.kill()
    thread.join(10)
    assert not thread.is_alive()


def _post_ignoring_errors(http: httpx.Client, path: str, body: object) -> None:
    with contextlib.suppress(httpx.HTTPError):
        http.post(path, json=body)


def tear_the_tail(journal: Path) -> None:
    """Append the first half of a copy of the last record: a record cut by a kill inside its write."""
    segment = next(s for s in reversed(list_segments(journal)) if len(list(SegmentReader(s.read_bytes()))))
    last = list(SegmentReader(segment.read_bytes()))[-1]
    data = segment.read_bytes()[last.offset : last.offset + RECORD_HEADER.size + len(last.payload)]
    with list_segments(journal)[-1].open("ab") as tail:
        tail.write(data[: len(data) // 2])


def run(journal: Path, log: Path, kills: dict[int, str]) -> list[list[object]]:
    """AGENTS sessions x TURNS turns, round robin, with the server killed and restarted at `kills` (step -> how);
    returns every session's samples."""
    server = ServeProcess(journal, log)
    try:
        agents = [Agent(index) for index in range(AGENTS)]
        for agent in agents:
            agent.open(server.http)
        step = 0
        while any(len(agent.received) < TURNS for agent in agents):
            for agent in agents:
                if len(agent.received) >= TURNS:
                    continue
                how = kills.get(step)
                step += 1
                if how is None:
                    agent.turn(server.http)
                    continue
                if how == "between":
                    agent.turn(server.http)
                    server.kill()
                else:
                    kill_mid_turn(server, agent)
                    if how == "mid_write":
                        tear_the_tail(journal)
                logged = log.stat().st_size
                server = ServeProcess(journal, log)
                if how == "mid_write":
                    assert "DAMAGED" in log.read_text()[logged:], "the restart must report the torn record"
                for each in agents:
                    assert stored_response_ids(server.http, each.session_id) == each.received, f"after {how}"
                if agent.awaiting:
                    agent.turn(server.http)
        return [comparable(samples_of(server.http, agent.session_id)) for agent in agents]
    finally:
        server.stop()


def test_kill_9_at_random_points_loses_no_received_turn_and_resumes_token_exact(tmp_path: Path) -> None:
    rng = random.Random(int(os.environ.get("TITO_CRASH_SEED", "14")))
    steps = sorted(rng.sample(range(1, AGENTS * TURNS - 1), len(KILLS)))
    kills = dict(zip(steps, rng.sample(KILLS, len(KILLS)), strict=True))
    reference = run(tmp_path / "reference", tmp_path / "reference.log", {})
    crashed = run(tmp_path / "crashed", tmp_path / "crashed.log", kills)
    assert crashed == reference, f"kills at {kills}"
