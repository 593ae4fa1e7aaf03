"""A streamed reply's read bursts: the SSE events that arrive in one read are decoded in one parse and become one
chunk, equal to the events taken one by one; wherever the reads split the body, the generation is the same; an
error, malformed or non-object event mid-burst is raised, named, after the ids before it."""

from __future__ import annotations

import asyncio
import itertools
import re
from array import array
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.engines.raw_server import STREAM_HEAD, RawServer, chunk, sse_body
from tito.engines.http import HttpEngineClient
from tito.engines.protocol import FinishKind, GenerateRequest, GenerationChunk, SamplingParams, collect_stream
from tito.engines.sglang import SGLangEngine, parse_events, parse_reply
from tito.engines.vllm import VLLMEngine
from tito.errors import EngineRequestError, EngineResponseError

IDS = [101, 102, 103, 104, 105, 106, 107, 151645]


def logprob(position: int) -> float:
    return -(position + 1) / 8


def sglang_event(end: int, *, cumulative: bool = False, version: str = "v1", top: bool = False) -> dict[str, Any]:
    """SGLang's event after `end` ids: the last id (incremental) or all so far (cumulative)."""
    start = 0 if cumulative else end - 1
    finish = {"type": "stop", "matched": IDS[-1]} if end == len(IDS) else None
    meta: dict[str, Any] = {
        "finish_reason": finish, "prompt_tokens": 5, "completion_tokens": end, "cached_tokens": 2,
        "weight_version": version, "output_token_logprobs": [[logprob(i), IDS[i], None] for i in range(start, end)],
    }  # fmt: skip
    if top:
        meta["output_top_logprobs"] = [[[logprob(i), IDS[i], None], [-9.0, 7, None]] for i in range(start, end)]
    return {"text": "", "output_ids": IDS[start:end], "meta_info": meta}


def vllm_events() -> list[dict[str, Any]]:
    """vLLM's completion chunks, one id each (the last with the finish), then its usage chunk."""
    events: list[dict[str, Any]] = []
    for index, token in enumerate(IDS):
        finish = "stop" if index == len(IDS) - 1 else None
        choice = {"index": 0, "text": "", "token_ids": [token], "finish_reason": finish,
                  "stop_reason": token if finish else None,
                  "logprobs": {"token_logprobs": [logprob(index)], "top_logprobs": None}}  # fmt: skip
        events.append({"id": "cmpl-1", "choices": [choice]})
    return [*events, {"id": "cmpl-1", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": len(IDS)}}]


def request() -> GenerateRequest:
    return GenerateRequest([1, 2, 3, 4, 5], SamplingParams(max_new_tokens=16), "rid-1", "s-1")


@pytest.mark.parametrize("cumulative", [False, True], ids=["incremental", "cumulative"])
def test_a_burst_of_events_is_one_chunk_equal_to_the_events_one_by_one(cumulative: bool) -> None:
    events = [sglang_event(end, cumulative=cumulative, top=True) for end in range(1, len(IDS) + 1)]
    one_by_one: list[GenerationChunk] = []
    for event in events:
        one_by_one.append(parse_reply(event, already_received=sum(len(chunk.ids) for chunk in one_by_one)))
    for split in range(1, len(events)):  # two bursts, the second after `split` events
        first = parse_events(events[:split], already_received=0)
        second = parse_events(events[split:], already_received=split)
        assert len(first) == len(second) == 1
        assert first[0].ids + second[0].ids == array("i", IDS) == sum((c.ids for c in one_by_one), array("i"))
        assert first[0].logprobs + second[0].logprobs == sum((c.logprobs for c in one_by_one), array("f"))
        assert first[0].top_logprobs + second[0].top_logprobs == sum((c.top_logprobs for c in one_by_one), ())
        assert first[0].finish is None and second[0].finish == one_by_one[-1].finish
        assert second[0].finish is not None and second[0].finish.matched_token_id == IDS[-1]
        assert (second[0].prompt_tokens, second[0].cached_tokens, second[0].weight_version) == (5, 2, "v1")


def test_a_weight_version_change_within_a_burst_starts_a_new_chunk_and_nothing_after_the_finish_is_read() -> None:
    events = [sglang_event(end, version="v1" if end <= 3 else "v2") for end in range(1, len(IDS) + 1)]
    after_finish = {"output_ids": [9], "meta_info": {"completion_tokens": 99}}  # would be an error if read
    chunks = parse_events([*events, after_finish], already_received=0)
    assert [(list(c.ids), c.weight_version) for c in chunks] == [(IDS[:3], "v1"), (IDS[3:], "v2")]
    assert chunks[0].finish is None and chunks[1].finish is not None


def client() -> HttpEngineClient:
    return HttpEngineClient("sglang", "http://127.0.0.1:9", timeout=1.0)


def test_a_burst_is_decoded_in_one_parse_and_an_error_event_mid_burst_comes_after_the_events_before_it() -> None:
    payloads = [b' {"n": 1}', b'{"n": 2}', b' {"error": {"message": "too long", "code": 400}}', b'{"n": 3}']
    events, error = client().decode_events("/generate", payloads)
    assert events == [{"n": 1}, {"n": 2}]
    assert isinstance(error, EngineRequestError) and "too long" in str(error) and error.engine_status == 400
    assert client().decode_events("/generate", payloads[:2]) == ([{"n": 1}, {"n": 2}], None)


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        (b'{"n": 2', b'{"n": 2'),  # cut
        (b'{"n": 2}, {"n": 9}', b'{"n": 2}, {"n": 9}'),  # two values in one payload: the joined parse has one more
        (b"", b"''"),  # an empty payload
        (b"[1, 2]", b"[1, 2]"),  # valid JSON but not an object
    ],
)
def test_a_malformed_event_in_a_burst_is_named_after_the_events_before_it(bad: bytes, named: bytes) -> None:
    events, error = client().decode_events("/generate", [b'{"n": 1}', bad, b'{"n": 3}'])
    assert events == [{"n": 1}]
    assert isinstance(error, EngineResponseError) and error.fault == "malformed"
    assert named.decode() in str(error), str(error)


def split_reply(body: bytes, splits: list[int]) -> list[bytes | asyncio.Event | float]:
    """The reply with its body cut at `splits`, a short pause between the parts (so each is its own read)."""
    cuts = sorted({0, *splits, len(body)})
    parts: list[bytes | asyncio.Event | float] = [STREAM_HEAD]
    for start, end in itertools.pairwise(cuts):
        parts += [body[start:end], 0.003]
    return parts


async def streamed(kind: str, splits: list[int] | None) -> tuple[list[GenerationChunk], int]:
    """The chunks of one streamed generation from a server writing `kind`'s events (cut at `splits`, or all at
    once), and how many connections the server saw over two streams (1: the first went back to the pool)."""
    body = sse_body([sglang_event(end) for end in range(1, len(IDS) + 1)] if kind == "sglang" else vllm_events())

    async def reply(request: bytes, reader: asyncio.StreamReader) -> list[bytes | asyncio.Event | float]:
        return [STREAM_HEAD + body] if splits is None else split_reply(body, splits)

    async with RawServer(reply) as server:
        url = f"http://127.0.0.1:{server.port}"
        engine = SGLangEngine(url) if kind == "sglang" else VLLMEngine(url, model="m")
        chunks = [chunk async for chunk in engine.stream(request())]
        generation = await collect_stream(engine.stream(request()), 0.0)
        await engine.aclose()
    assert generation.output_ids == array("i", IDS)
    return chunks, server.connections


@pytest.mark.parametrize("kind", ["sglang", "vllm"])
@pytest.mark.asyncio
async def test_a_stream_written_at_once_is_one_chunk_with_every_id_and_the_finish(kind: str) -> None:
    chunks, connections = await streamed(kind, None)
    assert len(chunks) == 1 and connections == 1
    assert chunks[0].ids == array("i", IDS) and chunks[0].logprobs == array("f", map(logprob, range(len(IDS))))
    assert chunks[0].finish is not None and chunks[0].finish.kind is FinishKind.STOP and chunks[0].prompt_tokens == 5


@settings(max_examples=25, deadline=None)
@given(kind=st.sampled_from(["sglang", "vllm"]), splits=st.lists(st.integers(1, 2000), min_size=1, max_size=4))
def test_a_stream_split_across_reads_anywhere_gives_the_same_generation(kind: str, splits: list[int]) -> None:
    whole, _ = asyncio.run(streamed(kind, None))
    chunks, connections = asyncio.run(streamed(kind, splits))
    assert connections == 1, "a stream read to [DONE] leaves its connection for the next request"
    assert sum((chunk.ids for chunk in chunks), array("i")) == whole[0].ids
    assert sum((chunk.logprobs for chunk in chunks), array("f")) == whole[0].logprobs
    assert [chunk.finish for chunk in chunks if chunk.finish is not None] == [whole[0].finish]
    assert chunks[-1].finish is not None and len(chunks) <= len(set(splits)) + 1


@pytest.mark.asyncio
async def test_an_error_event_after_ids_in_one_burst_yields_those_ids_then_the_engines_refusal() -> None:
    events = [sglang_event(1), sglang_event(2), {"error": {"message": "KV cache full", "code": 503}}, sglang_event(3)]

    async def reply(request: bytes, reader: asyncio.StreamReader) -> bytes:
        return STREAM_HEAD + sse_body(events)

    async with RawServer(reply) as server:
        engine = SGLangEngine(f"http://127.0.0.1:{server.port}")
        received: list[GenerationChunk] = []
        with pytest.raises(EngineResponseError, match="KV cache full") as caught:
            async for chunk in engine.stream(request()):
                received.append(chunk)
        await engine.aclose()
    assert [list(chunk.ids) for chunk in received] == [IDS[:2]] and caught.value.engine_status == 503


@pytest.mark.asyncio
async def test_a_malformed_event_mid_burst_is_a_malformed_reply_naming_it() -> None:
    body = STREAM_HEAD + chunk(b"data: " + orjson.dumps(sglang_event(1)) + b"\n\ndata: {not json\n\n") + b"0\r\n\r\n"

    async def reply(request: bytes, reader: asyncio.StreamReader) -> bytes:
        return body

    async with RawServer(reply) as server:
        engine = SGLangEngine(f"http://127.0.0.1:{server.port}")
        with pytest.raises(EngineResponseError, match=re.escape("not JSON: b'{not json'")) as caught:
            async for _ in engine.stream(request()):
                pass
        await engine.aclose()
    assert caught.value.fault == "malformed"
