"""A streamed turn whose engine writes all its events at once (one read): one engine chunk, so one parser feed, one
encoding and two ASGI sends (the headers; the opening chunk, the events and the end), as many for 8 ids as for 150;
through tito's real SGLang client and a real uvicorn."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tests.engines.raw_server import STREAM_HEAD, RawServer, sse_body
from tito.engines.instant import InstantEngine
from tito.engines.sglang import SGLangEngine
from tito.server import ServerOptions, ServerState, create_app
from tito.server.commands.running import serve_in_thread
from tito.tokenizer_loading import LocalTokenizer


def sglang_events(ids: list[int]) -> list[dict[str, Any]]:
    """SGLang's incremental events (`--incremental-streaming-output`), one id each, the last with the stop."""
    events = []
    for index, token in enumerate(ids):
        finish = {"type": "stop", "matched": token} if index == len(ids) - 1 else None
        meta = {"finish_reason": finish, "prompt_tokens": 9, "completion_tokens": index + 1, "cached_tokens": 0,
                "output_token_logprobs": [[-0.5, token, None]]}  # fmt: skip
        events.append({"text": "", "output_ids": [token], "meta_info": meta})
    return events


@contextlib.contextmanager
def engine_writing_at_once(reply: list[bytes]) -> Iterator[str]:
    """An SGLang wire in its own thread answering each request with `reply[0]` in one write; yields its URL."""

    async def answer(request: bytes, reader: asyncio.StreamReader) -> bytes:
        return reply[0]

    loop = asyncio.new_event_loop()
    server = RawServer(answer)
    loop.run_until_complete(server.__aenter__())
    thread = threading.Thread(target=loop.run_forever, name="raw-sglang", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.run_until_complete(server.__aexit__())
        loop.close()


def counting_sends(app: ASGIApp, sends: list[Message]) -> ASGIApp:
    """`app`, recording the messages it sends for chat turns."""

    async def counted_app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].endswith("/chat/completions"):
            await app(scope, receive, send)
            return

        async def counted(message: Message) -> None:
            sends.append(message)
            await send(message)

        await app(scope, receive, counted)

    return counted_app


def test_a_turn_whose_events_arrive_in_one_read_is_a_few_sends_however_many_ids(
    qwen3_tokenizer: LocalTokenizer,
) -> None:
    stop = qwen3_tokenizer.convert_tokens_to_ids("<|im_end|>")
    reply: list[bytes] = []
    sends: list[Message] = []
    counts = {}
    with engine_writing_at_once(reply) as engine_url:
        state = ServerState(qwen3_tokenizer, SGLangEngine(engine_url), ServerOptions(family="qwen3"))
        with serve_in_thread(counting_sends(create_app(state), sends)) as url, httpx.Client(base_url=url) as http:  # type: ignore[arg-type]
            for words in (8, 150):
                text = " ".join(["word"] * words)
                ids = [*qwen3_tokenizer.encode(text, add_special_tokens=False), stop]
                reply[:] = [STREAM_HEAD + sse_body(sglang_events(ids))]
                session = http.post("/sessions").json()["session_id"]
                sends.clear()
                body = {"model": "m", "messages": [{"role": "user", "content": "go"}], "stream": True}
                streamed = http.post(f"/sessions/{session}/v1/chat/completions", json=body)
                assert streamed.status_code == 200, streamed.text
                events = [orjson.loads(line[6:]) for line in streamed.text.splitlines() if line.startswith("data: {")]
                assert "".join(event["choices"][0]["delta"]["content"] or "" for event in events) == text
                assert events[-1]["choices"][0]["finish_reason"] == "stop"
                counts[words] = len(ids), [message["type"] for message in sends]
    (few_ids, few_sends), (many_ids, many_sends) = counts[8], counts[150]
    assert many_ids > 10 * few_ids
    # the headers, then the opening chunk, every event and the end in one send
    assert few_sends == many_sends == ["http.response.start", "http.response.body"], counts


def test_a_turn_read_in_several_bursts_sends_its_opening_with_the_first_events(qwen3_tokenizer: LocalTokenizer) -> None:
    stop = qwen3_tokenizer.convert_tokens_to_ids("<|im_end|>")
    ids = [*qwen3_tokenizer.encode("one two three four", add_special_tokens=False), stop]
    engine = InstantEngine(ids, token_delay=0.01)  # an id a read: each chunk that decides text is a send of its own
    state = ServerState(qwen3_tokenizer, engine, ServerOptions(family="qwen3"))
    sends: list[Message] = []
    with serve_in_thread(counting_sends(create_app(state), sends)) as url, httpx.Client(base_url=url) as http:  # type: ignore[arg-type]
        session = http.post("/sessions").json()["session_id"]
        body = {"model": "m", "messages": [{"role": "user", "content": "go"}], "stream": True}
        streamed = http.post(f"/sessions/{session}/v1/chat/completions", json=body)
    assert streamed.status_code == 200, streamed.text
    bodies = [message["body"] for message in sends if message["type"] == "http.response.body"]
    assert len(bodies) > 2, sends  # several bursts, several sends
    first = [orjson.loads(line[6:]) for line in bodies[0].split(b"\n") if line.startswith(b"data: {")]
    assert first[0]["choices"][0]["delta"]["role"] == "assistant"
    assert len(first) == 2 and first[1]["choices"][0]["delta"]["content"], first  # the first text, in the same send
    events = [orjson.loads(line[6:]) for line in streamed.text.splitlines() if line.startswith("data: {")]
    assert "".join(event["choices"][0]["delta"]["content"] or "" for event in events) == "one two three four"
