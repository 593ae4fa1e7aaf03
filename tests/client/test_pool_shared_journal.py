"""`SessionPool(shared_journal=True)` over real `tito serve --journal DIR --journal-shared` processes: a server killed
with `kill -9` is dead to the pool, its sessions move to the live server, which takes each over from the journal on
its next call, and the rollout goes on there token-exact (no router in front: the pool holds the map)."""

from __future__ import annotations

import time
from pathlib import Path

import openai
import pytest

from tests.server.cluster import TitoProcess
from tito.client import Samples, SessionPool

pytestmark = pytest.mark.crash

USER = {"role": "user", "content": "Hello"}


def test_a_dead_servers_sessions_continue_on_the_live_one(tmp_path: Path) -> None:
    engine = ["--engine", "instant"]
    processes = [TitoProcess(f"tito-{n}", tmp_path / "journal", tmp_path / f"{n}.log", engine) for n in range(2)]
    try:
        for process in processes:
            process.wait_ready()
        urls = [f"http://{process.address}" for process in processes]
        with SessionPool(urls, shared_journal=True, dead_after_s=0.2, poll_every_s=0.0, deadline_s=15) as pool:
            handles = [pool.create_session() for _ in range(4)]
            first = {}
            for handle in handles:
                agent = openai.OpenAI(base_url=handle.openai_base_url, api_key="x", max_retries=0)
                reply = agent.chat.completions.create(model="m", messages=[USER])  # type: ignore[list-item]
                first[handle.session_id] = reply
            doomed = processes[1]
            moved = [h.session_id for h in handles if h.server_url == f"http://{doomed.address}"]
            assert len(moved) == 2
            doomed.kill()
            ends = time.monotonic() + 10
            while urls[1] in pool.placement.alive():
                assert time.monotonic() < ends, "the killed server was not found dead in 10 s"
                pool.check(deadline_s=0.5)
            assert pool.lost() == [] and urls[1] not in pool.placement.alive()
            for session_id in moved:
                handle = pool.handle(session_id)
                assert handle.server_url == urls[0]
                messages = [USER, {"role": "assistant", "content": first[session_id].choices[0].message.content},
                            {"role": "user", "content": "Again"}]  # fmt: skip
                agent = openai.OpenAI(base_url=handle.openai_base_url, api_key="x", max_retries=5)
                agent.chat.completions.create(model="m", messages=messages)  # type: ignore[arg-type]
                got = pool.samples(session_id)
                assert isinstance(got, Samples)
                [sample] = got.samples
                assert sample["spans"][0]["response_id"] == first[session_id].id  # the turn before the crash
                assert len(sample["spans"]) == 2
    finally:
        for process in processes:
            process.stop()
