"""The in-test SGLang server's replies against real SGLang's reply contract, not against tito's client.

Two oracles: SGLang's own generated wire types (`sglang.api.v1.api_types` of the pinned sglang wheel, loaded by
tests/engines/sglang_api.py: every reply and streamed event must decode with `GenerateResponse.from_json_value`, its
finish reason as SGLang's `FinishStop`/`FinishLength`/`FinishAbort`, not the untyped fallback), and the behaviour
recorded from SGLang's source in ../shared/research/engines.md §1.1 and §1.3, which the types do not state:
`output_ids` keep the matched stop id, `output_token_logprobs` triples `[logprob, id, null]` as long as
`completion_tokens`, streamed events cumulative by default and deltas with `--incremental-streaming-output`, an
unfinished event's finish reason null. A drift of the fake from either fails here, whatever tito's client reads.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any, Literal

import httpx
import pytest
from pydantic import BaseModel, ConfigDict, StrictFloat, StrictInt, StrictStr

from tests.engines.fake_engine import FakeServer
from tests.engines.servers import ServerThread, start_fake
from tests.engines.sglang_api import sglang_api_types

PROMPT = [151644, 872, 198, 9707, 151645, 198, 151644, 77091, 198]


class _Contract(BaseModel):
    model_config = ConfigDict(extra="allow")  # SGLang adds keys over versions; these must be there, strictly typed


class StopFinish(_Contract):
    type: Literal["stop"]
    matched: StrictInt | StrictStr


class LengthFinish(_Contract):
    type: Literal["length"]
    length: StrictInt


class AbortFinish(_Contract):
    type: Literal["abort"]
    message: StrictStr
    status_code: StrictInt | None
    err_type: StrictStr | None


class MetaInfo(_Contract):
    id: StrictStr
    finish_reason: StopFinish | LengthFinish | AbortFinish | None
    prompt_tokens: StrictInt
    completion_tokens: StrictInt
    cached_tokens: StrictInt
    weight_version: StrictStr
    e2e_latency: StrictFloat
    output_token_logprobs: list[tuple[StrictFloat | None, StrictInt, StrictStr | None]]


class GenerateReply(_Contract):
    text: StrictStr
    output_ids: list[StrictInt]
    meta_info: MetaInfo


@pytest.fixture(scope="module")
def sglang() -> Iterator[tuple[FakeServer, ServerThread]]:
    server, thread = start_fake("sglang")
    yield server, thread
    thread.stop()


def body(rid: str, max_new_tokens: int = 8, stream: bool = False, stop: list[int] | None = None) -> dict[str, Any]:
    """A request as tito's SGLang client sends it (engines.md §1.1)."""
    return {
        "input_ids": PROMPT,
        "sampling_params": {"max_new_tokens": max_new_tokens, "stop_token_ids": stop or [151645], "temperature": 1.0},
        "return_logprob": True,
        "logprob_start_len": -1,
        "rid": rid,
        "stream": stream,
    }


def checked(reply: dict[str, Any], rid: str, cumulative_from: int = 0) -> GenerateReply:
    """The reply validated against the contract, and its counts and ids consistent with each other."""
    decoded = sglang_api_types().GenerateResponse.from_json_value(reply)  # raises on what SGLang would reject
    finish = decoded.meta_info.finish_reason
    assert finish is None or not isinstance(finish, dict), f"SGLang decodes {finish} only as an untyped fallback"
    parsed = GenerateReply.model_validate(reply)
    info = parsed.meta_info
    assert info.id == rid and info.prompt_tokens == len(PROMPT)
    assert [triple[1] for triple in info.output_token_logprobs] == parsed.output_ids
    assert info.completion_tokens == cumulative_from + len(parsed.output_ids)
    if isinstance(info.finish_reason, StopFinish) and isinstance(info.finish_reason.matched, int):
        assert parsed.output_ids[-1] == info.finish_reason.matched, "output_ids keep the matched stop id"
    if isinstance(info.finish_reason, LengthFinish):
        assert info.finish_reason.length == info.completion_tokens
    return parsed


def events(url: str, request: dict[str, Any]) -> list[dict[str, Any]]:
    with httpx.stream("POST", f"{url}/generate", json=request, timeout=10) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        lines = [line[len("data: ") :] for line in response.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]", "a stream ends with data: [DONE]"
    return [json.loads(line) for line in lines[:-1]]


def test_a_whole_reply_stopped_by_a_stop_id_or_by_length_keeps_the_contract(
    sglang: tuple[FakeServer, ServerThread],
) -> None:
    server, thread = sglang
    server.behaviour.reply_ids = [11, 12, 151645]
    stopped = checked(httpx.post(f"{thread.url}/generate", json=body("r-stop")).json(), "r-stop")
    assert isinstance(stopped.meta_info.finish_reason, StopFinish) and stopped.output_ids == [11, 12, 151645]
    cut = checked(httpx.post(f"{thread.url}/generate", json=body("r-len", max_new_tokens=2)).json(), "r-len")
    assert isinstance(cut.meta_info.finish_reason, LengthFinish) and cut.output_ids == [11, 12]
    server.behaviour.reply_ids = None


@pytest.mark.parametrize("incremental", [False, True])
def test_streamed_events_are_cumulative_or_deltas_and_only_the_last_is_finished(
    sglang: tuple[FakeServer, ServerThread], incremental: bool
) -> None:
    server, thread = sglang
    server.behaviour.reply_ids = [21, 22, 23, 151645]
    server.behaviour.incremental = incremental
    try:
        rid = f"r-stream-{incremental}"
        streamed = events(thread.url, body(rid, stream=True))
        sent: list[int] = []
        for index, event in enumerate(streamed):
            parsed = checked(event, rid, len(sent) if incremental else 0)
            sent = [*sent, *parsed.output_ids] if incremental else parsed.output_ids
            assert (parsed.meta_info.finish_reason is None) == (index < len(streamed) - 1)
        assert sent == [21, 22, 23, 151645]
    finally:
        server.behaviour.reply_ids = None
        server.behaviour.incremental = False


def test_an_aborted_generation_answers_200_with_its_partial_output_and_an_abort_finish(
    sglang: tuple[FakeServer, ServerThread],
) -> None:
    server, thread = sglang
    server.behaviour.token_delay = 0.05
    replies: list[dict[str, Any]] = []
    worker = threading.Thread(
        target=lambda: replies.append(
            httpx.post(f"{thread.url}/generate", json=body("r-abort-1", 50), timeout=10).json()
        )
    )
    try:
        worker.start()
        while not any(request.body.get("rid") == "r-abort-1" for request in server.requests):
            worker.join(0.01)
        worker.join(0.1)
        assert httpx.post(f"{thread.url}/abort_request", json={"rid": "r-abort"}).status_code == 200  # by prefix
        worker.join(10)
    finally:
        server.behaviour.token_delay = 0.0
    parsed = checked(replies[0], "r-abort-1")
    assert (
        isinstance(parsed.meta_info.finish_reason, AbortFinish) and parsed.meta_info.finish_reason.message == "Aborted"
    )
    assert 0 < len(parsed.output_ids) < 50
