"""Streamed turns (`stream: true`) through a real uvicorn server and the official openai SDK.

A stream must add up to the non-streaming reply of the same script and commit the same record; it must leave
before the engine finishes; a disconnect, a deletion or an engine error mid-stream aborts and commits nothing.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import openai
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.lib.streaming.chat._completions import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk

from tests.parsing.cases import TOOLS as CASE_TOOLS
from tests.parsing.cases import assistant_messages, case_names, get_case, render_completion
from tests.parsing.test_incremental import PROPERTY, chunkings, chunks_of
from tests.server.conftest import Server, ServerFactory
from tito.server.turns.streaming import ChunkEncoder, delta_object
from tito.tokenizer_loading import LocalTokenizer

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}},
]
SCRIPTS = {
    "content": "Paris is the capital of France.<|im_end|>",
    "reasoning": "<think>\nThe user asks 6 * 7.\n</think>\n\n42<|im_end|>",
    "parallel_tool_calls": (
        '<think>\nTwo calls.\n</think>\n\nLet me check.\n<tool_call>\n{"name": "get_weather", "arguments": '
        '{"city": "Paris", "units": {"temp": "C", "days": [1, 2]}}}\n</tool_call>\n<tool_call>\n{"name": "search", '
        '"arguments": {"q": "a < b"}}\n</tool_call><|im_end|>'
    ),
    "invalid_tool_call": '<tool_call>\n{"name": "get_weather", "arguments": {"city": \n</tool_call><|im_end|>',
    "cut_by_length": 'Sure.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par',
}
USER = [{"role": "user", "content": "go"}]


def client(server: Server, session_id: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.chat_url(session_id), api_key="unused", max_retries=0)


def sample_of(server: Server, session_id: str) -> dict[str, Any]:
    response = server.http.post(f"/sessions/{session_id}/samples")
    assert response.status_code == 200, response.text
    return dict(response.json()["samples"][0])


def turns_of(server: Server, session_id: str) -> list[dict[str, Any]]:
    return list(server.http.get(f"/sessions/{session_id}").json()["turns"])


def wait_until(condition: Any, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert condition(), "timed out waiting"


def raw_events(server: Server, session_id: str, body: dict[str, Any]) -> list[Any]:
    """The SSE `data:` payloads of one streamed turn, decoded (`[DONE]` kept as a string)."""
    url = f"/sessions/{session_id}/v1/chat/completions"
    with server.http.stream("POST", url, json={"messages": USER, "stream": True, **body}) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line[len("data: ") :] for line in response.iter_lines() if line.startswith("data: ")]
    return [line if line == "[DONE]" else orjson.loads(line) for line in lines]


def sdk_message(events: list[bytes]) -> dict[str, Any]:
    """The assistant message the openai SDK's own stream accumulator builds from the SSE events."""
    state: ChatCompletionStreamState[Any] = ChatCompletionStreamState()
    for event in events:
        state.handle_chunk(ChatCompletionChunk.model_validate_json(event.removeprefix(b"data: ")))
    message = state.current_completion_snapshot.choices[0].message.model_dump(exclude_none=True)
    for call in message.get("tool_calls", []):
        call.pop("index", None)
    return dict(message)


@pytest.mark.parametrize("name", case_names())
@settings(PROPERTY, max_examples=10)  # the parser's own properties run more; this checks the wire and the SDK
@given(data=st.data(), sizes=chunkings, cut=st.floats(0.0, 1.0), truncate=st.booleans())
def test_for_every_family_and_chunking_the_sdk_accumulates_the_chunks_into_the_whole_parse(
    name: str, data: st.DataObject, sizes: list[int], cut: float, truncate: bool
) -> None:
    case = get_case(name)
    completion = render_completion(case, data.draw(assistant_messages(case)))
    ids, prompt_ids = list(completion.completion_ids), completion.prompt_ids
    if truncate:
        ids = ids[: int(len(ids) * cut)]
    whole = case.tito.parse_completion(ids, prompt_ids, CASE_TOOLS)
    parser = case.tito.incremental_parser(prompt_ids, CASE_TOOLS)
    encoder = ChunkEncoder("m")
    events = [encoder.chunk({"role": "assistant", "content": ""})]
    for chunk in chunks_of(ids, sizes):
        deltas = parser.feed(chunk)
        if deltas:
            events.append(encoder.chunk(delta_object(deltas)))
    rest, result = parser.finish()
    events.append(encoder.chunk(delta_object(rest), result.finish_reason))
    expected = {key: value for key, value in whole.message.items() if value not in (None, "", [])}
    accumulated = {key: value for key, value in sdk_message(events).items() if value not in (None, "", [])}
    assert accumulated == expected, case.tokenizer.decode(ids)


@pytest.mark.parametrize("script", list(SCRIPTS))
def test_a_stream_adds_up_to_the_non_streaming_reply_and_commits_the_same_turn(
    server: Server, qwen3_tokenizer: LocalTokenizer, script: str
) -> None:
    ids = qwen3_tokenizer.encode(SCRIPTS[script], add_special_tokens=False)
    max_tokens = len(ids) if script == "cut_by_length" else None
    server.engine.queue(ids, ids)
    whole_session, streamed_session = server.new_session(), server.new_session()
    whole = client(server, whole_session).chat.completions.create(
        model="m", messages=USER, tools=TOOLS, max_tokens=max_tokens
    )
    with client(server, streamed_session).chat.completions.stream(
        model="m", messages=USER, tools=TOOLS, max_tokens=max_tokens, stream_options={"include_usage": True}
    ) as stream:
        for _ in stream:
            pass
        streamed = stream.current_completion_snapshot  # get_final_completion() refuses a length cut
    whole_message = whole.choices[0].message.model_dump(exclude_none=True)
    streamed_message = streamed.choices[0].message.model_dump(exclude_none=True, exclude={"parsed"})
    for call in streamed_message.get("tool_calls", []):
        call.pop("index", None)
    assert streamed_message == whole_message
    assert streamed.choices[0].finish_reason == whole.choices[0].finish_reason
    assert streamed.usage is not None and whole.usage is not None
    assert streamed.usage.completion_tokens == whole.usage.completion_tokens == len(ids)
    assert streamed.usage.prompt_tokens == whole.usage.prompt_tokens
    whole_sample, streamed_sample = sample_of(server, whole_session), sample_of(server, streamed_session)
    for key in ("tokens", "loss_mask", "rollout_logprobs", "response_length"):
        assert streamed_sample[key] == whole_sample[key], key
    assert turns_of(server, streamed_session)[0]["finish_reason"] == whole.choices[0].finish_reason


def test_chunks_are_openai_shaped_and_carry_their_ids_when_asked(
    server: Server, qwen3_tokenizer: LocalTokenizer
) -> None:
    ids = qwen3_tokenizer.encode(SCRIPTS["parallel_tool_calls"], add_special_tokens=False)
    server.engine.queue(ids)
    session_id = server.new_session()
    events = raw_events(
        server, session_id, {"tools": TOOLS, "return_token_ids": True, "stream_options": {"include_usage": True}}
    )
    assert events[-1] == "[DONE]"
    chunks, usage = events[:-2], events[-2]
    assert {chunk["object"] for chunk in chunks} == {"chat.completion.chunk"}
    assert len({chunk["id"] for chunk in events[:-1]}) == 1
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert [chunk["choices"][0]["finish_reason"] for chunk in chunks][-1] == "tool_calls"
    assert all(chunk["choices"][0]["finish_reason"] is None for chunk in chunks[:-1])
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == len(ids)
    calls = [call for chunk in chunks for call in chunk["choices"][0]["delta"].get("tool_calls", [])]
    assert [(call["index"], call["function"]["name"]) for call in calls if "id" in call] == [
        (0, "get_weather"), (1, "search")
    ]  # fmt: skip
    streamed_ids = [i for chunk in chunks for i in chunk.get("tito", {}).get("token_ids", [])]
    streamed_logprobs = [x for chunk in chunks for x in chunk.get("tito", {}).get("logprobs", [])]
    sample = sample_of(server, session_id)
    assert streamed_ids == ids == sample["tokens"][-len(ids) :]
    assert streamed_logprobs == pytest.approx(sample["rollout_logprobs"][-len(ids) :])
    assert chunks[-1]["tito"]["session_id"] == session_id


@pytest.mark.parametrize("script", ["content", "reasoning", "parallel_tool_calls"])
def test_every_delta_has_the_keys_sdk_users_read(server: Server, qwen3_tokenizer: LocalTokenizer, script: str) -> None:
    """`delta.reasoning_content` is no field of the openai SDK's delta type: a chunk without the key raises
    AttributeError in the agent that reads it (as agents reading SGLang's or vLLM's streams do)."""
    server.engine.queue(qwen3_tokenizer.encode(SCRIPTS[script], add_special_tokens=False))
    session_id = server.new_session()
    stream = client(server, session_id).chat.completions.create(model="m", messages=USER, tools=TOOLS, stream=True)
    deltas = [chunk.choices[0].delta for chunk in stream if chunk.choices]
    reasoning = "".join(delta.reasoning_content or "" for delta in deltas)  # type: ignore[attr-defined]
    content = "".join(delta.content or "" for delta in deltas)
    stored = server.http.get(f"/sessions/{session_id}/turns/0").json()["messages"][-1]["message"]
    assert reasoning == stored.get("reasoning_content", "")
    assert content == (stored.get("content") or "")


def test_the_first_chunks_leave_before_the_engine_has_finished(server: Server, qwen3_tokenizer: LocalTokenizer) -> None:
    server.engine.queue(qwen3_tokenizer.encode(SCRIPTS["content"], add_special_tokens=False))
    server.engine.delay = 0.05  # per id: the engine samples slowly
    session_id = server.new_session()
    stream = client(server, session_id).chat.completions.create(model="m", messages=USER, stream=True)
    seen_content = False
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            seen_content = True
            break
    assert seen_content
    assert turns_of(server, session_id) == []  # content arrived while the engine was still sampling
    stream.close()


def test_a_client_that_disconnects_mid_stream_aborts_the_engine_and_commits_nothing(
    server: Server, qwen3_tokenizer: LocalTokenizer
) -> None:
    server.engine.queue(qwen3_tokenizer.encode(SCRIPTS["content"], add_special_tokens=False))
    server.engine.delay = 1.0  # cut short by the abort; a loaded machine must not finish the stream before hanging up
    session_id = server.new_session()
    url = f"/sessions/{session_id}/v1/chat/completions"
    aborted = len(server.engine.aborted)
    with server.http.stream("POST", url, json={"messages": USER, "stream": True}) as response:
        next(response.iter_lines())  # the role chunk (it leaves with the first id's events), then hang up
    # The engine's abort is sent (a call that had not started yet is never started: server/turns/engine_guard.py).
    wait_until(lambda: len(server.engine.aborted) == aborted + 1)
    time.sleep(0.1)  # the stream's end, had it committed, would be recorded by now
    assert turns_of(server, session_id) == []
    server.engine.delay = 0.0
    reply = client(server, session_id).chat.completions.create(model="m", messages=USER)
    assert reply.choices[0].message.content  # the session is as it was: the same first turn works


def test_a_non_streaming_client_that_disconnects_aborts_the_engine_and_commits_nothing(server: Server) -> None:
    server.engine.delay = 5.0
    session_id = server.new_session()
    calls = len(server.engine.requests)
    with pytest.raises(httpx.ReadTimeout), httpx.Client(base_url=server.url, timeout=0.5) as http:
        http.post(f"/sessions/{session_id}/v1/chat/completions", json={"messages": USER})
    assert len(server.engine.requests) == calls + 1
    wait_until(lambda: server.engine.requests[-1].request_id in server.engine.aborted)
    assert turns_of(server, session_id) == []


def test_an_engine_error_mid_stream_is_an_sse_error_and_commits_nothing(
    server: Server, qwen3_tokenizer: LocalTokenizer
) -> None:
    server.engine.queue(qwen3_tokenizer.encode(SCRIPTS["content"], add_special_tokens=False))
    server.engine.fault = "break"
    session_id = server.new_session()
    events = raw_events(server, session_id, {})
    error = events[-1]["error"]
    assert error == {
        "type": "EngineResponseError",
        "message": error["message"],
        "code": "bad_reply",
        "engine": "instant",
    }
    assert "mid-stream" in events[-1]["error"]["message"] and "[DONE]" not in events
    server.engine.queue(qwen3_tokenizer.encode(SCRIPTS["content"], add_special_tokens=False))
    with pytest.raises(openai.APIError, match="mid-stream"):
        for _ in client(server, session_id).chat.completions.create(model="m", messages=USER, stream=True):
            pass
    assert turns_of(server, session_id) == []


def test_deleting_the_session_mid_stream_aborts_the_engine_and_ends_the_stream_with_410(
    server: Server, qwen3_tokenizer: LocalTokenizer
) -> None:
    server.engine.queue(qwen3_tokenizer.encode(SCRIPTS["content"], add_special_tokens=False))
    server.engine.delay = 0.05
    session_id = server.new_session()
    errors: list[Exception] = []

    def turn() -> None:
        try:
            for _ in client(server, session_id).chat.completions.create(model="m", messages=USER, stream=True):
                pass
        except openai.APIError as exc:
            errors.append(exc)

    calls = len(server.engine.requests)
    worker = threading.Thread(target=turn)
    worker.start()
    wait_until(lambda: len(server.engine.requests) > calls)
    assert server.http.delete(f"/sessions/{session_id}").status_code == 204
    worker.join(5)
    assert server.engine.requests[-1].request_id in server.engine.aborted
    assert errors and "deleted during the turn" in str(errors[0])


def test_an_sdk_retry_of_a_committed_streamed_turn_streams_it_again_without_sampling(server: Server) -> None:
    session_id = server.new_session()
    body = {"messages": USER, "stream": True}
    first = raw_events(server, session_id, body)
    calls = len(server.engine.requests)
    url = f"/sessions/{session_id}/v1/chat/completions"
    with server.http.stream("POST", url, json=body, headers={"x-stainless-retry-count": "1"}) as response:
        again = [orjson.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: {")]
    assert len(server.engine.requests) == calls
    content = "".join(chunk["choices"][0]["delta"].get("content") or "" for chunk in first[:-1])
    assert "".join(chunk["choices"][0]["delta"].get("content") or "" for chunk in again) == content
    assert again[0]["id"] == first[0]["id"]


def test_a_stream_past_the_engine_timeout_aborts_and_ends_with_a_timeout_error(
    serve: ServerFactory, qwen3_tokenizer: LocalTokenizer
) -> None:
    impatient = serve(engine_timeout=0.3)
    impatient.engine.queue(qwen3_tokenizer.encode(SCRIPTS["content"], add_special_tokens=False))
    impatient.engine.delay = 0.1
    session_id = impatient.new_session()
    events = raw_events(impatient, session_id, {})
    assert events[-1]["error"]["type"] == "EngineTimeoutError" and "--engine-timeout" in events[-1]["error"]["message"]
    assert impatient.engine.aborted == [impatient.engine.requests[-1].request_id]
    assert turns_of(impatient, session_id) == []
