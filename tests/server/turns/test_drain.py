"""Weight-update drain through the real HTTP stack: pause (429 with Retry-After in the dialect's shape, or hold),
turns in flight counted until their reply is sent, drain, resume with a new weight version; a turn that straddles
the update records both versions, whole and streamed, in every dialect; the metrics count paused time, drains and
held turns."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.engines.fake_engine import FakeServer
from tests.engines.servers import ServerThread, start_fake
from tests.server.dialects.support import FIRST_TURNS
from tito.engines.protocol import Engine
from tito.engines.sglang import SGLangEngine
from tito.engines.vllm import VLLMEngine
from tito.server import ServerOptions, ServerState, create_app
from tito.server.commands.launch import instant_reply_ids
from tito.server.commands.running import serve_in_thread
from tito.tokenizer import get_tito_tokenizer
from tito.tokenizer_loading import LocalTokenizer

TOKEN_DELAY = 0.02


@dataclass
class Tito:
    http: httpx.Client
    fake: FakeServer

    def session(self) -> str:
        return str(self.http.post("/sessions").json()["session_id"])

    def turn(self, session_id: str, dialect: str, stream: bool) -> httpx.Response:
        """One turn; a stream is read to its end (its reply is sent only then)."""
        path, body = FIRST_TURNS[dialect]
        url = f"/sessions/{session_id}/{path}"
        if not stream:
            return self.http.post(url, json=body)
        with self.http.stream("POST", url, json=body | {"stream": True}) as response:
            response.read()
        return response

    def gate(self) -> dict[str, Any]:
        return dict(self.http.get("/admin/turns").json())

    def wait_for(self, check: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        deadline = time.monotonic() + 10
        while not check(status := self.gate()):
            assert time.monotonic() < deadline, status
            time.sleep(0.01)
        return status

    def weight_versions(self, session_id: str) -> list[list[str]]:
        response = self.http.post(f"/sessions/{session_id}/samples")
        assert response.status_code == 200, response.text
        return [span["weight_versions"] for span in response.json()["samples"][0]["spans"]]

    def metric(self, name: str) -> float:
        for line in self.http.get("/metrics").text.splitlines():
            if line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
        raise AssertionError(f"no metric {name}")


ENGINES = {
    "sglang": lambda url: SGLangEngine(url, model="tiny"),
    "vllm-generate": lambda url: VLLMEngine(url, model="tiny", endpoint="generate"),  # weight_versions spans
    "vllm-completions": lambda url: VLLMEngine(url, model="tiny"),  # reports no weight version
}


@pytest.fixture(scope="module")
def serve(qwen3_tokenizer: LocalTokenizer) -> Iterator[Callable[[str], Tito]]:
    """tito in front of an in-test engine server of the given kind, one per kind for the module."""
    running: dict[str, Tito] = {}
    with contextlib.ExitStack() as stack:

        def start(kind: str) -> Tito:
            if kind not in running:
                fake, thread = start_fake(kind.split("-")[0])
                stack.callback(ServerThread.stop, thread)
                engine: Engine = ENGINES[kind](fake.url)
                state = ServerState(qwen3_tokenizer, engine, ServerOptions(family="qwen3"))
                url = stack.enter_context(serve_in_thread(create_app(state)))
                running[kind] = Tito(stack.enter_context(httpx.Client(base_url=url, timeout=20)), fake)
            tito = running[kind]
            tito.fake.reset()
            tito.fake.behaviour.reply_ids = instant_reply_ids(get_tito_tokenizer(qwen3_tokenizer, "qwen3"))
            tito.fake.behaviour.token_delay = TOKEN_DELAY
            return tito

        yield start


ERROR_TYPES = {"chat": "PausedError", "anthropic": "rate_limit_error", "responses": "PausedError"}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("dialect", sorted(FIRST_TURNS))
def test_a_drain_waits_for_the_turn_in_flight_which_records_both_weight_versions(
    serve: Callable[[str], Tito], dialect: str, stream: bool
) -> None:
    tito = serve("sglang" if stream else "vllm-generate")  # SGLang streams a version per event; vLLM spans them
    tito.fake.behaviour.weight_version = "step-1"
    tito.fake.behaviour.weight_update = (3, "step-2")
    session_id, refused_session = tito.session(), tito.session()
    held_before = tito.metric("tito_drain_seconds_count")
    with ThreadPoolExecutor(1) as pool:
        in_flight: Future[httpx.Response] = pool.submit(tito.turn, session_id, dialect, stream)
        tito.wait_for(lambda status: status["in_flight"] == 1)
        paused = tito.http.post("/admin/pause", json={"mode": "reject", "retry_after": 2.5}).json()
        assert paused["paused"] and paused["mode"] == "reject" and paused["in_flight"] == 1

        refused = tito.turn(refused_session, dialect, stream)
        assert refused.status_code == 429
        assert refused.headers["retry-after"] == "3" and refused.headers["retry-after-ms"] == "2500"
        assert ERROR_TYPES[dialect] in refused.text
        assert not in_flight.done()

        drained = tito.http.post("/admin/drain", params={"timeout": 20})
        assert drained.status_code == 200, drained.text
        assert drained.json()["drained"] and drained.json()["in_flight"] == 0
        assert in_flight.result(timeout=5).status_code == 200  # its whole reply was sent before the drain ended
        assert drained.json()["drain_seconds"] > 0

    resumed = tito.http.post("/admin/resume", json={"weight_version": "step-2"}).json()
    assert not resumed["paused"] and resumed["paused_for_seconds"] > 0 and resumed["weight_version"] == "step-2"
    assert tito.weight_versions(session_id) == [["step-1", "step-2"]]
    assert tito.turn(refused_session, dialect, stream).status_code == 200  # the refused turn, retried after resume
    assert tito.metric("tito_drain_seconds_count") == held_before + 1
    assert tito.metric("tito_paused_seconds_total") >= resumed["paused_for_seconds"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_held_turn_waits_for_resume_and_records_the_declared_weight_version(
    serve: Callable[[str], Tito], stream: bool
) -> None:
    """vLLM's completions report no weight version: the held turn records the one the resume declared."""
    tito = serve("vllm-completions")
    held_before = tito.metric("tito_turns_held_total")
    session_id = tito.session()
    assert tito.http.post("/admin/pause", json={"mode": "hold"}).json()["mode"] == "hold"
    with ThreadPoolExecutor(1) as pool:
        held: Future[httpx.Response] = pool.submit(tito.turn, session_id, "chat", stream)
        status = tito.wait_for(lambda status: status["held"] == 1)
        assert status["in_flight"] == 0 and tito.fake.requests == []  # held before reaching the engine
        time.sleep(0.1)
        assert not held.done()
        tito.http.post("/admin/resume", json={"weight_version": f"step-9-{stream}"})
        assert held.result(timeout=20).status_code == 200
    assert tito.weight_versions(session_id) == [[f"step-9-{stream}"]]
    assert tito.metric("tito_turns_held_total") == held_before + 1
    assert tito.gate() | {"paused_seconds": 0} == {
        "paused": False,
        "mode": None,
        "in_flight": 0,
        "held": 0,
        "paused_seconds": 0,
        "weight_version": f"step-9-{stream}",
    }


def test_a_drain_that_times_out_says_so_and_keeps_the_pause(serve: Callable[[str], Tito]) -> None:
    tito = serve("sglang")
    tito.fake.behaviour.token_delay = 0.1
    with ThreadPoolExecutor(1) as pool:
        in_flight = pool.submit(tito.turn, tito.session(), "chat", True)
        tito.wait_for(lambda status: status["in_flight"] == 1)
        tito.http.post("/admin/pause")
        drained = tito.http.post("/admin/drain", params={"timeout": 0.05})
        assert drained.status_code == 504 and drained.json()["drained"] is False
        assert drained.json()["in_flight"] == 1 and drained.json()["paused"]
        assert in_flight.result(timeout=20).status_code == 200
    tito.http.post("/admin/resume")
    assert tito.http.post("/admin/resume").json()["paused_for_seconds"] == 0  # resuming twice is harmless


def test_a_drain_with_no_turn_in_flight_is_done_at_once_even_with_a_zero_timeout(serve: Callable[[str], Tito]) -> None:
    """Found by the schema fuzzer: `?timeout=0` answered 504 "not drained" with nothing in flight."""
    tito = serve("sglang")
    for timeout in (0, 0.0, 5):
        drained = tito.http.post("/admin/drain", params={"timeout": timeout})
        assert drained.status_code == 200, drained.text
        assert drained.json()["drained"] is True and drained.json()["in_flight"] == 0


def test_admin_bodies_and_parameters_are_checked(serve: Callable[[str], Tito]) -> None:
    tito = serve("sglang")
    wrong_mode = tito.http.post("/admin/pause", json={"mode": "stop"})
    assert wrong_mode.status_code == 400 and "mode" in wrong_mode.text
    assert tito.http.post("/admin/pause", json={"retry_after": 0}).status_code == 400
    assert tito.http.post("/admin/pause", content=b'{"retry_after": 1e999}').status_code == 400  # finite only
    assert tito.http.post("/admin/pause", json={"retry_after": "5"}).status_code == 400  # no string for a number
    assert tito.http.post("/admin/resume", json={"version": "x"}).status_code == 400
    wrong_timeout = tito.http.post("/admin/drain", params={"timeout": "soon"})
    assert wrong_timeout.status_code == 400 and "timeout" in wrong_timeout.text
    assert not tito.gate()["paused"]


def test_the_admin_routes_need_the_api_key(qwen3_tokenizer: LocalTokenizer) -> None:
    engine = VLLMEngine("http://127.0.0.1:9", model="tiny")
    state = ServerState(qwen3_tokenizer, engine, ServerOptions(family="qwen3", api_key="secret"))
    with serve_in_thread(create_app(state)) as url:
        assert httpx.post(f"{url}/admin/pause").status_code == 401
        assert httpx.get(f"{url}/admin/turns").status_code == 401
        keyed = httpx.post(f"{url}/admin/pause", headers={"Authorization": "Bearer secret"})
        assert keyed.status_code == 200 and keyed.json()["paused"]
