"""The crash loop: concurrent sessions taking streamed and whole turns while `tito serve --journal` is killed with
SIGKILL again and again (at random moments, mid-request or not) and restarted on the same journal. Every turn a
client saw committed (a whole reply, or a stream up to `[DONE]`) is stored afterwards, and every session's samples
hold an uninterrupted run's ids, loss mask and logprobs bit for bit (their metadata may differ: a turn committed
whose reply the kill cut off is retried, a new node id in place of the old).

Marked `soak` (.ci/run runs -m soak); TITO_CRASH_SEED picks other kill moments.
"""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.server.journal_agent import Agent, comparable, samples_of, stored_response_ids
from tests.server.test_crash import ServeProcess

pytestmark = pytest.mark.soak

AGENTS, TURNS, KILLS = 8, 6, 5
TOKEN_DELAY = 0.02
"""Seconds per streamed token of the instant engine: long enough that the run outlasts the kill moments (0.2-3 s)
and a kill finds requests in flight however fast the machine (at 0.002 a quiet machine finished before the first
kill)."""


class Fleet:
    """AGENTS agents, each in its own thread, against whichever server process is up; a turn whose request
    failed (the server died) is resent once the server is back."""

    def __init__(self, server: ServeProcess) -> None:
        self.server = server
        self.agents = [Agent(index) for index in range(AGENTS)]
        for agent in self.agents:
            agent.open(server.http)
        self.up = threading.Event()
        self.up.set()
        self.failures: list[BaseException] = []
        self.interrupted = 0
        """Requests the kills cut off (resent after the restart)."""

    def drive(self, agent: Agent) -> None:
        try:
            while len(agent.received) < TURNS:
                self.up.wait(60)
                server = self.server
                try:
                    if (agent.index + len(agent.received)) % 2:
                        agent.turn_streamed(server.http)
                    else:
                        agent.turn(server.http)
                except (httpx.HTTPError, AssertionError):
                    if server is self.server and self.up.is_set() and server.process.poll() is None:
                        raise  # the server is up: a real failure, not the kill
                    self.interrupted += 1
                    time.sleep(0.05)
        except BaseException as exc:
            self.failures.append(exc)


def run(journal: Path, log: Path, kill_at: list[float]) -> tuple[list[list[object]], int]:
    """Run the fleet, killing and restarting the server `kill_at` seconds after the start; every session's
    samples and how many requests the kills cut off."""
    fleet = Fleet(ServeProcess(journal, log, token_delay=TOKEN_DELAY))
    threads = [threading.Thread(target=fleet.drive, args=(agent,)) for agent in fleet.agents]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for moment in kill_at:
        time.sleep(max(0.0, started + moment - time.monotonic()))
        if not any(thread.is_alive() for thread in threads):
            break
        fleet.up.clear()
        fleet.server.kill()
        fleet.server = ServeProcess(journal, log, token_delay=TOKEN_DELAY)
        for agent in fleet.agents:  # every reply received before the kill is stored
            stored = stored_response_ids(fleet.server.http, agent.session_id)
            assert stored[: len(agent.received)] == agent.received
        fleet.up.set()
    for thread in threads:
        thread.join(120)
    try:
        assert not fleet.failures, fleet.failures
        http = fleet.server.http
        for agent in fleet.agents:
            assert stored_response_ids(http, agent.session_id) == agent.received
            assert len(agent.received) == TURNS
        return [comparable(samples_of(http, agent.session_id)) for agent in fleet.agents], fleet.interrupted
    finally:
        fleet.server.stop()


def test_repeated_kill_9_under_concurrent_sessions_keeps_every_committed_turn_token_exact(tmp_path: Path) -> None:
    rng = random.Random(int(os.environ.get("TITO_CRASH_SEED", "29")))
    kill_at = sorted(rng.uniform(0.2, 3.0) for _ in range(KILLS))
    reference, _ = run(tmp_path / "reference", tmp_path / "reference.log", [])
    crashed, interrupted = run(tmp_path / "crashed", tmp_path / "crashed.log", kill_at)
    assert interrupted > 0, "no kill hit a request in flight: the loop tested nothing"
    token_exact = [[sample[:5] for sample in samples] for samples in crashed]  # ids, mask, logprobs, length, status
    assert token_exact == [[sample[:5] for sample in samples] for samples in reference], f"kills at {kill_at}"
