"""Engine faults never become the client's fault (docs/engine-faults.md has the table).

Every fault of the in-test SGLang and vLLM servers (tests/engines/fake_engine.py FAULTS), behind tito's real engine
clients, on each way a turn reaches the engine (a whole reply, a stream, an SDK retry, a tree branch; a delete in
flight), on a journaled server: the client gets the documented 5xx (503 with Retry-After, 502, 504) and an
OpenAI-shaped error naming the engine and the fault; nothing is committed (the session's samples and the journal are
byte-identical before and after); another session keeps serving, and so does this one once the fault is gone;
`tito_engine_faults{engine, kind}` counts the fault once.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import httpx
import openai
import orjson
import pytest

from tests.engines.fake_engine import ABORT_FAULTS, FAULTS, FaultPlan
from tests.server.conftest import FaultServer, running_fault_server
from tito.tokenizer_loading import LocalTokenizer

EXPECTED: dict[str, tuple[int, str, str]] = {
    "refused": (503, "EngineUnavailableError", "unavailable"),
    "status_500": (502, "EngineResponseError", "status_5xx"),
    "not_found": (502, "EngineResponseError", "not_found"),
    "malformed_json": (502, "EngineResponseError", "malformed"),
    "missing_fields": (502, "EngineResponseError", "missing_field"),
    "bad_ids": (502, "EngineResponseError", "bad_ids"),
    "nan_logprobs": (502, "EngineResponseError", "malformed"),
    "inf_logprobs": (502, "EngineResponseError", "bad_logprobs"),
    "unknown_finish": (502, "EngineResponseError", "unknown_finish"),
    "slow": (504, "EngineTimeoutError", "timeout"),
    "cut": (502, "EngineResponseError", "cut"),
    "endless": (504, "EngineTimeoutError", "timeout"),
}
"""fault -> (HTTP status, error type, error code = the metric's kind)."""
FAULT_TIMEOUT = 0.4
"""--engine-timeout for a request faulted `slow` or `endless` (the server's own is 30 s)."""

Messages = list[dict[str, Any]]


def test_every_fault_has_its_documented_outcome() -> None:
    assert set(EXPECTED) == set(FAULTS)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def chat(server: FaultServer, session_id: str, messages: Messages, **headers: str) -> httpx.Response:
    return server.http.post(f"/sessions/{session_id}/v1/chat/completions", json={"messages": messages}, headers=headers)


def streamed(server: FaultServer, session_id: str, messages: Messages) -> tuple[int, list[tuple[str, Any]]]:
    """The status and the (event, data) pairs of a streamed turn; `message` is SSE's default event."""
    url = f"/sessions/{session_id}/v1/chat/completions"
    events: list[tuple[str, Any]] = []
    with server.http.stream("POST", url, json={"messages": messages, "stream": True}) as response:
        kind = "message"
        for line in response.iter_lines():
            if line.startswith("event: "):
                kind = line[len("event: ") :]
            elif line.startswith("data: "):
                data = line[len("data: ") :]
                events.append((kind, data if data == "[DONE]" else orjson.loads(data)))
                kind = "message"
    return response.status_code, events


def turn(server: FaultServer, session_id: str, messages: Messages) -> Messages:
    """One committed turn; the conversation with its reply."""
    response = chat(server, session_id, messages)
    assert response.status_code == 200, response.text
    return [*messages, response.json()["choices"][0]["message"]]


def started(server: FaultServer, **session: Any) -> tuple[str, Messages]:
    """A new session with two committed turns."""
    session_id = server.new_session(**session)
    messages = turn(server, session_id, [user("hello")])
    return session_id, turn(server, session_id, [*messages, user("how are you?")])


def journal_bytes(server: FaultServer) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(server.journal.rglob("*")) if path.is_file())


@contextlib.contextmanager
def nothing_committed(server: FaultServer, session_id: str) -> Iterator[None]:
    """The block changes neither the session (its samples byte for byte, its description) nor the journal."""
    samples_url = f"/sessions/{session_id}/samples"
    samples, described = server.http.post(samples_url).content, description(server, session_id)
    journal = journal_bytes(server)
    yield
    assert journal_bytes(server) == journal
    assert description(server, session_id) == described
    assert server.http.post(samples_url).content == samples


def description(server: FaultServer, session_id: str) -> dict[str, Any]:
    """`GET /sessions/{id}` but the clock (the inspector's `summary.last_activity`) and the request counters
    (`resends`: how each request matched the history, counted whether or not its turn then committed)."""
    described = dict(server.http.get(f"/sessions/{session_id}?touch=false").json())
    described.get("summary", {}).pop("last_activity", None)
    described.pop("resends", None)
    return described


@contextlib.contextmanager
def one_fault(server: FaultServer, session_id: str, fault: str) -> Iterator[None]:
    """The block's one engine call suffers `fault`: nothing is committed, and the fault is counted once."""
    counts = fault_counts(server)
    options = server.state.options
    if fault in ("slow", "endless"):  # only this request waits for --engine-timeout: a loaded machine never 504s others
        server.state.options = replace(options, engine_timeout=FAULT_TIMEOUT)
    try:
        with nothing_committed(server, session_id):
            server.fake.plan = FaultPlan(fault, times=1)
            yield
    finally:
        server.state.options = options
    assert server.fake.plan.injected == [fault]
    assert counted_since(server, counts) == {(server.kind, EXPECTED[fault][2]): 1}


_FAULT_LINE = re.compile(
    r'^tito_engine_faults_total\{engine="([^"]+)",kind="([^"]+)",process="[^"]+"\} (\S+)$', re.MULTILINE
)


def fault_counts(server: FaultServer) -> dict[tuple[str, str], float]:
    text = server.http.get("/metrics").text
    return {(engine, kind): float(value) for engine, kind, value in _FAULT_LINE.findall(text)}


def counted_since(server: FaultServer, before: dict[tuple[str, str], float]) -> dict[tuple[str, str], float]:
    after = fault_counts(server)
    return {key: value - before.get(key, 0.0) for key, value in after.items() if value != before.get(key, 0.0)}


def assert_engine_error(server: FaultServer, error: dict[str, Any], fault: str) -> None:
    _, error_type, code = EXPECTED[fault]
    assert (error["type"], error["code"], error["engine"]) == (error_type, code, server.kind), error
    assert error["message"].startswith(f"engine {server.kind!r}"), error


def assert_others_serve(server: FaultServer, session_id: str, messages: Messages) -> None:
    """Another session serves, and so does this one with the request that failed."""
    started(server)
    assert len(turn(server, session_id, messages)) == len(messages) + 1


@pytest.mark.parametrize("fault", FAULTS)
def test_a_whole_reply(faulty: FaultServer, fault: str) -> None:
    session_id, messages = started(faulty)
    asked = [*messages, user("next")]
    with one_fault(faulty, session_id, fault):
        response = chat(faulty, session_id, asked)
    status = EXPECTED[fault][0]
    assert response.status_code == status, response.text
    assert_engine_error(faulty, response.json()["error"], fault)
    assert "x-should-retry" not in response.headers  # a 5xx: the SDK retries it
    assert response.headers.get("retry-after") == ("1" if status == 503 else None)
    assert_others_serve(faulty, session_id, asked)


@pytest.mark.parametrize("fault", FAULTS)
def test_a_streamed_reply(faulty: FaultServer, fault: str) -> None:
    session_id, messages = started(faulty)
    asked = [*messages, user("next")]
    with one_fault(faulty, session_id, fault):
        status, events = streamed(faulty, session_id, asked)
    assert status == 200  # the headers left before the engine answered: the error is the stream's last event
    kind, data = events[-1]
    assert kind == "error" and all(data != "[DONE]" for _, data in events), events
    assert_engine_error(faulty, data["error"], fault)
    assert_others_serve(faulty, session_id, asked)


@pytest.mark.parametrize("fault", FAULTS)
def test_an_sdk_retry_after_the_fault_commits_the_turn_once(faulty: FaultServer, fault: str) -> None:
    session_id, messages = started(faulty)
    asked = [*messages, user("next")]
    with one_fault(faulty, session_id, fault):
        failed = chat(faulty, session_id, asked)
    assert failed.status_code == EXPECTED[fault][0] and "x-should-retry" not in failed.headers
    retried = chat(faulty, session_id, asked, **{"x-stainless-retry-count": "1"})
    assert retried.status_code == 200, retried.text
    turns = faulty.http.get(f"/sessions/{session_id}").json()["turns"]
    assert len(turns) == 3 and turns[-1]["response_id"] == retried.json()["id"]


@pytest.mark.parametrize("fault", FAULTS)
def test_a_tree_branch(faulty: FaultServer, fault: str) -> None:
    session_id, messages = started(faulty, trajectory="tree")
    branch = [*messages[:2], user("a different question")]
    with one_fault(faulty, session_id, fault):
        response = chat(faulty, session_id, branch)
    assert response.status_code == EXPECTED[fault][0], response.text
    assert_engine_error(faulty, response.json()["error"], fault)
    assert_others_serve(faulty, session_id, branch)
    nodes = faulty.http.get(f"/sessions/{session_id}").json()["nodes"]
    assert [node["parent_id"] for node in nodes] == [None, 0, 0]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("abort_fault", [None, *ABORT_FAULTS])
def test_deleting_the_session_in_flight_is_410_whatever_the_engines_abort_does(
    faulty: FaultServer, abort_fault: str | None, stream: bool
) -> None:
    aborts_on_the_wire = faulty.kind == "sglang"  # vLLM's completions API aborts by closing the connection
    deleted_in_flight(faulty, abort_fault, stream, aborts_on_the_wire)


@pytest.fixture(scope="module")
def vllm_generate(qwen3_tokenizer: LocalTokenizer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultServer]:
    """vLLM with `/inference/v1/generate` for whole replies: aborts go over the wire (/inference/v1/abort_requests)."""
    with running_fault_server(qwen3_tokenizer, "vllm-generate", tmp_path_factory.mktemp("vllm-generate")) as server:
        server.fake.behaviour.reply_ids = [*qwen3_tokenizer.encode("Fine, thanks.", add_special_tokens=False), 151645]
        yield server


@pytest.mark.parametrize("abort_fault", [None, *ABORT_FAULTS])
def test_deleting_in_flight_on_vllms_generate_endpoint_is_410_whatever_its_abort_does(
    vllm_generate: FaultServer, abort_fault: str | None
) -> None:
    deleted_in_flight(vllm_generate, abort_fault, False, True)
    assert vllm_generate.fake.requests[-1].path == "/inference/v1/generate"


def deleted_in_flight(
    server: FaultServer,
    abort_fault: str | None,
    stream: bool,
    aborts_on_the_wire: bool,
) -> None:
    """Delete a session while the engine holds its turn (until aborted), the engine's abort failing as told: the
    turn's client gets 410, the failed abort is counted (when the abort is an HTTP call), others keep serving."""
    session_id, messages = started(server)
    counts = fault_counts(server)
    server.fake.plan = FaultPlan("slow", times=1)  # the engine holds the call until it is aborted
    server.fake.abort_fault = abort_fault
    outcome: list[Any] = []
    asked = [*messages, user("next")]

    def in_flight() -> None:
        outcome.append(streamed(server, session_id, asked) if stream else chat(server, session_id, asked))

    calls = len(server.fake.requests)
    worker = threading.Thread(target=in_flight)
    worker.start()
    deadline = time.monotonic() + 5
    while len(server.fake.requests) == calls and time.monotonic() < deadline:  # the turn reached the engine
        time.sleep(0.005)
    assert server.http.delete(f"/sessions/{session_id}").status_code == 204
    worker.join(5)
    if stream:
        status, events = outcome[0]
        assert status == 200 and events[-1][0] == "error"
        error = events[-1][1]["error"]
    else:
        assert outcome[0].status_code == 410, outcome[0].text
        error = outcome[0].json()["error"]
    assert error["type"] == "SessionGoneError" and "deleted during the turn" in error["message"]
    failed = {(server.kind, "abort_failed"): 1.0} if abort_fault and aborts_on_the_wire else {}
    assert counted_since(server, counts) == failed
    server.fake.abort_fault = None
    started(server)


def test_the_openai_sdk_retries_an_engine_fault_and_the_turn_commits_once(faulty: FaultServer) -> None:
    session_id, messages = started(faulty)
    sdk = openai.OpenAI(base_url=faulty.chat_url(session_id), api_key="unused", max_retries=2)
    faulty.fake.plan = FaultPlan("status_500", times=1)
    reply = sdk.chat.completions.create(model="m", messages=[*messages, user("next")])  # type: ignore[list-item]
    assert faulty.fake.plan.injected == ["status_500"]
    turns = faulty.http.get(f"/sessions/{session_id}").json()["turns"]
    assert len(turns) == 3 and turns[-1]["response_id"] == reply.id


def test_the_openai_sdk_raises_a_streamed_engine_fault_with_the_engines_words(faulty: FaultServer) -> None:
    session_id, messages = started(faulty)
    sdk = openai.OpenAI(base_url=faulty.chat_url(session_id), api_key="unused", max_retries=0)
    faulty.fake.plan = FaultPlan("cut", times=1)
    with pytest.raises(openai.APIError, match=f"engine '{faulty.kind}'.*cut mid-reply") as raised:
        for _ in sdk.chat.completions.create(model="m", messages=[*messages, user("next")], stream=True):  # type: ignore[list-item]
            pass
    assert isinstance(raised.value.body, dict) and raised.value.body["code"] == "cut"
