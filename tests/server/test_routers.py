"""Real routers in front of two in-test engines, tito in front of them: vllm-router (`sticky_least_loaded`,
`consistent_hash`) and the SGLang Model Gateway (`smg`, consistent hashing on tito's routing key). Every turn of a
session reaches one engine, new sessions spread by load, an ended session is released at the router
(`/finish_session`), and a router without that route is tolerated. Marker `routers` (.ci/run runs it, ~45 s)."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.engines.fake_engine import FakeServer
from tests.engines.servers import ServerThread, free_port, start_fake
from tito.engines.protocol import Engine
from tito.engines.sglang import SGLangEngine
from tito.engines.vllm import VLLMEngine
from tito.server import ServerOptions, ServerState, create_app
from tito.server.commands.launch import instant_reply_ids
from tito.server.commands.running import serve_in_thread
from tito.tokenizer import get_tito_tokenizer
from tito.tokenizer_loading import LocalTokenizer

pytestmark = pytest.mark.routers


@dataclass
class Router:
    url: str
    workers: list[FakeServer]
    log: Path

    def worker_of(self, session_id: str) -> set[int]:
        """The workers that served any request carrying the session's identity (smg forwards only its own header)."""
        return {
            index
            for index, worker in enumerate(self.workers)
            for sent in worker.requests
            if session_id in (sent.headers.get("x-session-id"), sent.headers.get("x-smg-routing-key"))
        }


def vllm_router(policy: str) -> list[str]:
    return ["vllm-router", "--policy", policy, "--log-level", "info", "--disable-retries"]


def smg(policy: str) -> list[str]:
    return ["smg", "launch", "--policy", policy, "--disable-retries", "--log-level", "warn"]


def start_router(command: list[str], kind: str, tmp_path: Path) -> Iterator[Router]:
    if shutil.which(command[0]) is None:
        pytest.fail(f"{command[0]} is not installed: pip install -e '.[test]' (vllm-router, smg)")
    started = [start_fake(kind) for _ in range(2)]
    workers = [server for server, _ in started]
    port = free_port()
    log_path = tmp_path / f"{command[0]}.log"
    command = [*command, "--host", "127.0.0.1", "--port", str(port), "--worker-urls", *[w.url for w in workers]]
    command += ["--prometheus-host", "127.0.0.1", "--prometheus-port", str(free_port())]
    with log_path.open("w") as log:
        router = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while not _ready(url):
            if router.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"{command[0]} did not start: {log_path.read_text()[-2000:]}")
            time.sleep(0.2)
        yield Router(url, workers, log_path)
    finally:
        router.kill()
        router.wait(timeout=10)
        for _, thread in started:
            ServerThread.stop(thread)


def _ready(url: str) -> bool:
    try:
        readiness = httpx.get(f"{url}/readiness", timeout=1)
        if readiness.status_code == 200 and "healthy_workers" in readiness.text:
            return bool(readiness.json()["healthy_workers"] == 2)
        return httpx.get(f"{url}/health", timeout=1).status_code == 200
    except (httpx.HTTPError, ValueError):
        return False


@dataclass
class Tito:
    http: httpx.Client
    state: ServerState

    def session(self) -> str:
        return str(self.http.post("/sessions").json()["session_id"])

    def turns(self, session_id: str, count: int) -> None:
        """`count` turns of a session, every other one streamed (the engines' reply is always the same message)."""
        messages: list[dict[str, Any]] = []
        reply: dict[str, Any] = {}
        for turn in range(count):
            messages.append({"role": "user", "content": f"session {session_id}, turn {turn}"})
            body = {"model": "m", "messages": messages}
            url = f"/sessions/{session_id}/v1/chat/completions"
            if turn % 2:
                with self.http.stream("POST", url, json=body | {"stream": True}) as response:
                    assert response.status_code == 200, response.read()
                    response.read()
            else:
                response = self.http.post(url, json=body)
                assert response.status_code == 200, response.text
                reply = {key: value for key, value in response.json()["choices"][0]["message"].items() if value}
            messages.append(reply)

    def releases(self, outcome: str) -> float:
        for line in self.http.get("/metrics").text.splitlines():
            if line.startswith("tito_router_releases_total{") and f'outcome="{outcome}"' in line:
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    def wait_for_releases(self, outcome: str, count: int) -> None:
        deadline = time.monotonic() + 10
        while self.releases(outcome) < count:
            assert time.monotonic() < deadline, f"{self.releases(outcome)} releases {outcome}, expected {count}"
            time.sleep(0.02)


@pytest.fixture
def tito_over(qwen3_tokenizer: LocalTokenizer) -> Iterator[Callable[[Engine, Router], Tito]]:
    with contextlib.ExitStack() as stack:

        def start(engine: Engine, router: Router) -> Tito:
            for worker in router.workers:
                worker.behaviour.reply_ids = instant_reply_ids(get_tito_tokenizer(qwen3_tokenizer, "qwen3"))
            state = ServerState(qwen3_tokenizer, engine, ServerOptions(family="qwen3"))
            url = stack.enter_context(serve_in_thread(create_app(state)))
            return Tito(stack.enter_context(httpx.Client(base_url=url, timeout=20)), state)

        yield start


@pytest.fixture
def sticky_vllm(tmp_path: Path) -> Iterator[Router]:
    yield from start_router(vllm_router("sticky_least_loaded"), "vllm", tmp_path)


def test_sticky_least_loaded_keeps_sessions_spreads_them_by_load_and_frees_a_released_ones_slot(
    sticky_vllm: Router, tito_over: Callable[[Engine, Router], Tito]
) -> None:
    tito = tito_over(VLLMEngine(sticky_vllm.url, model="tiny"), sticky_vllm)
    sessions = [tito.session() for _ in range(6)]
    for session_id in sessions:
        tito.turns(session_id, 3)
    placement = {session_id: sticky_vllm.worker_of(session_id) for session_id in sessions}
    assert all(len(workers) == 1 for workers in placement.values()), placement
    on_first = [session_id for session_id in sessions if placement[session_id] == {0}]
    assert len(on_first) == 3, f"sessions were not spread by load: {placement}"

    for session_id in on_first:  # the first worker's sessions end: the router must forget them
        assert tito.http.delete(f"/sessions/{session_id}").status_code == 204
    tito.wait_for_releases("released", 3)
    log = sticky_vllm.log.read_text()
    assert all(f"finished session '{session_id}'" in log for session_id in on_first), log[-2000:]

    newcomers = [tito.session() for _ in range(2)]  # the first worker now holds 0 sessions, the second 3
    for session_id in newcomers:
        tito.turns(session_id, 2)
    assert [sticky_vllm.worker_of(session_id) for session_id in newcomers] == [{0}, {0}]


def test_samples_taken_with_end_release_the_session_and_expiry_does_too(
    sticky_vllm: Router, tito_over: Callable[[Engine, Router], Tito]
) -> None:
    tito = tito_over(VLLMEngine(sticky_vllm.url, model="tiny", endpoint="generate"), sticky_vllm)
    ended, kept = tito.session(), tito.session()
    for session_id in (ended, kept):
        tito.turns(session_id, 1)
    assert tito.http.post(f"/sessions/{kept}/samples").status_code == 200  # no end flag: still pinned
    assert tito.http.post(f"/sessions/{ended}/samples", json={"end": True}).status_code == 200
    tito.wait_for_releases("released", 1)
    short = tito.http.post("/sessions", json={"ttl_seconds": 0.2}).json()["session_id"]
    tito.turns(short, 1)
    tito.wait_for_releases("released", 2)  # the sweeper expired it
    log = sticky_vllm.log.read_text()
    assert f"finished session '{ended}'" in log and f"finished session '{short}'" in log
    assert f"finished session '{kept}'" not in log


@pytest.fixture
def hashed_sglang(tmp_path: Path) -> Iterator[Router]:
    yield from start_router(vllm_router("consistent_hash"), "sglang", tmp_path)


def test_consistent_hash_in_front_of_sglang_keeps_every_turn_of_a_session_on_one_engine(
    hashed_sglang: Router, tito_over: Callable[[Engine, Router], Tito]
) -> None:
    tito = tito_over(SGLangEngine(hashed_sglang.url, model="tiny"), hashed_sglang)
    sessions = [tito.session() for _ in range(8)]
    for session_id in sessions:
        tito.turns(session_id, 3)
    placement = {session_id: hashed_sglang.worker_of(session_id) for session_id in sessions}
    assert all(len(workers) == 1 for workers in placement.values()), placement
    tito.http.delete(f"/sessions/{sessions[0]}")
    tito.wait_for_releases("released", 1)  # the route exists whatever the policy


@pytest.fixture
def hashed_smg(tmp_path: Path) -> Iterator[Router]:
    """smg's cache_aware reads no prefix from `/generate`'s input_ids (sessions moved between workers when tried):
    its consistent hashing on tito's routing key keeps them."""
    yield from start_router(smg("consistent_hashing"), "sglang", tmp_path)


def test_a_gateway_without_a_release_route_is_tolerated(
    hashed_smg: Router, tito_over: Callable[[Engine, Router], Tito]
) -> None:
    tito = tito_over(SGLangEngine(hashed_smg.url, model="tiny"), hashed_smg)
    sessions = [tito.session() for _ in range(4)]
    for session_id in sessions:
        tito.turns(session_id, 3)
    placement = {session_id: hashed_smg.worker_of(session_id) for session_id in sessions}
    assert all(len(workers) == 1 for workers in placement.values()), placement
    for session_id in sessions[:2]:
        assert tito.http.delete(f"/sessions/{session_id}").status_code == 204
    tito.wait_for_releases("no_route", 1)
    asked = [sent.path for worker in hashed_smg.workers for sent in worker.requests if "finish" in sent.path]
    assert tito.releases("failed") == 0 and tito.releases("released") == 0 and asked == []
    tito.turns(tito.session(), 2)  # turns go on as before
