"""The SGLang Model Gateway (PyPI `smg`, consistent hashing) keeps every request of a session on one worker.

Two in-test SGLang servers behind a real `smg launch --policy consistent_hashing`; SGLangEngine sends the session
id as `X-SMG-Routing-Key` (and `routing_key`), so all turns of a session reach the worker holding its prefix cache.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.conftest import REQUIRE_BINARIES, unavailable
from tests.engines.fake_engine import FakeServer
from tests.engines.servers import ServerThread, free_port, start_fake
from tito.engines.protocol import FinishKind, GenerateRequest, SamplingParams, collect_stream
from tito.engines.sglang import SGLangEngine

SESSIONS = 16
TURNS = 4


@dataclass
class Gateway:
    url: str
    workers: list[FakeServer]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    if shutil.which("smg") is None:
        unavailable(
            "the SGLang Model Gateway `smg` is not on PATH (pip install smg; activate its venv)", REQUIRE_BINARIES
        )
    started = [start_fake("sglang") for _ in range(2)]
    workers = [server for server, _ in started]
    port = free_port()
    log_path: Path = tmp_path_factory.mktemp("smg") / "smg.log"
    command = ["smg", "launch", "--host", "127.0.0.1", "--port", str(port), "--worker-urls"]
    command += [worker.url for worker in workers]
    command += ["--policy", "consistent_hashing", "--disable-retries", "--log-level", "warn"]
    command += ["--prometheus-host", "127.0.0.1", "--prometheus-port", str(free_port())]
    with log_path.open("w") as log:
        router = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_until_ready(f"http://127.0.0.1:{port}", router, log_path)
        yield Gateway(f"http://127.0.0.1:{port}", workers)
    finally:
        router.kill()
        router.wait(timeout=10)
        for _, thread in started:
            ServerThread.stop(thread)


def _wait_until_ready(url: str, router: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if router.poll() is not None:
            pytest.fail(f"smg exited with {router.returncode}: {log_path.read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/readiness", timeout=1).json().get("healthy_workers") == 2:
                return
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(0.2)
    pytest.fail(f"smg did not register both workers within 60 s: {log_path.read_text()[-2000:]}")


def request(session: str, turn: int) -> GenerateRequest:
    prompt = [151644, 872, 198, turn, 151645, 198]
    return GenerateRequest(prompt, SamplingParams(max_new_tokens=3), f"{session}-{turn}", session)


def workers_of(gateway: Gateway, session: str) -> set[int]:
    return {
        index
        for index, worker in enumerate(gateway.workers)
        for sent in worker.requests
        if sent.headers.get("x-smg-routing-key") == session
    }


@pytest.mark.asyncio
async def test_every_request_of_a_session_reaches_the_same_worker_through_the_gateway(gateway: Gateway):
    for worker in gateway.workers:
        worker.reset()
    engine = SGLangEngine(gateway.url, timeout=30)
    sessions = [f"session-{index}" for index in range(SESSIONS)]
    for turn in range(TURNS):
        generations = await asyncio.gather(*(engine.generate(request(session, turn)) for session in sessions))
        assert all(generation.finish.kind is FinishKind.LENGTH for generation in generations)
        streamed = await collect_stream(engine.stream(request(sessions[turn], 100 + turn)), time.monotonic())
        assert len(streamed.output_ids) == 3
    await engine.aclose()

    placement = {session: workers_of(gateway, session) for session in sessions}
    assert all(len(workers) == 1 for workers in placement.values()), f"a session moved between workers: {placement}"
    counts = [sum(1 for sent in worker.requests if sent.path == "/generate") for worker in gateway.workers]
    assert sum(counts) == SESSIONS * TURNS + TURNS
    assert all(counts), f"consistent hashing spread {SESSIONS} sessions over both workers, got {counts}"
    forwarded = gateway.workers[0].requests[0].body
    assert forwarded["routing_key"].startswith("session-") and forwarded["return_logprob"] is True
