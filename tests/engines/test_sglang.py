"""SGLangEngine against an in-test server speaking SGLang's native /generate (research/engines.md section 1)."""

from __future__ import annotations

import asyncio
import time
from array import array

import pytest

from tests.engines.fake_engine import FakeServer, scripted_id, scripted_logprob, scripted_top_logprobs
from tests.engines.servers import free_port
from tests.engines.sglang_api import sglang_api_types
from tito.engines.protocol import FinishKind, GenerateRequest, LogprobSemantics, SamplingParams, collect_stream
from tito.engines.sglang import SGLangEngine, generate_body, parse_finish_reason, parse_reply
from tito.errors import (
    EngineRequestError,
    EngineResponseError,
    EngineTimeoutError,
    EngineUnavailableError,
)

PROMPT = [151644, 872, 198, 9707, 151645, 198, 151644, 77091, 198]


def request(max_new_tokens: int = 5, stop: tuple[int, ...] = (), rid: str = "s1-t1-a", session: str | None = "s1"):
    sampling = SamplingParams(max_new_tokens=max_new_tokens, stop_token_ids=stop, temperature=0.7, seed=3)
    return GenerateRequest(PROMPT, sampling, rid, session)


def expected_ids(count: int) -> list[int]:
    return [scripted_id(PROMPT, i) for i in range(count)]


def expected_logprobs(count: int) -> array[float]:
    return array("f", [scripted_logprob(i) for i in range(count)])


@pytest.mark.asyncio
async def test_the_request_has_sglang_native_shape_with_the_routing_key_in_body_and_header(sglang_server: FakeServer):
    engine = SGLangEngine(sglang_server.url)
    await engine.generate(request(stop=(151645,)))
    await engine.aclose()
    sent = sglang_server.requests[0]
    assert sent.body["input_ids"] == PROMPT
    assert sent.body["rid"] == "s1-t1-a"
    assert sent.body["return_logprob"] is True and sent.body["logprob_start_len"] == -1
    assert sent.body["stream"] is False
    assert sent.body["routing_key"] == "s1" and sent.headers["x-smg-routing-key"] == "s1"
    params = sent.body["sampling_params"]
    assert params["stop_token_ids"] == [151645] and params["skip_special_tokens"] is False
    assert params["max_new_tokens"] == 5 and params["temperature"] == 0.7 and params["sampling_seed"] == 3
    assert params["top_k"] == -1


@pytest.mark.asyncio
async def test_a_prompt_given_as_an_int_array_is_sent_as_the_same_json_list(sglang_server: FakeServer):
    """A session's prompt is an array('i'); its ids are written from the buffer (tito.engines.id_json)."""
    engine = SGLangEngine(sglang_server.url)
    sampling = SamplingParams(max_new_tokens=2)
    await engine.generate(GenerateRequest(array("i", PROMPT), sampling, "s1-t1-a", "s1"))
    await engine.aclose()
    assert sglang_server.requests[0].body["input_ids"] == PROMPT


@pytest.mark.asyncio
async def test_a_request_without_session_sends_no_routing_key(sglang_server: FakeServer):
    engine = SGLangEngine(sglang_server.url)
    await engine.generate(request(session=None))
    await engine.aclose()
    assert "routing_key" not in sglang_server.requests[0].body
    assert "x-smg-routing-key" not in sglang_server.requests[0].headers


@pytest.mark.asyncio
async def test_generate_returns_ids_logprobs_finish_and_weight_version_as_compact_arrays(sglang_server: FakeServer):
    sglang_server.behaviour.weight_version = "step-42"
    engine = SGLangEngine(sglang_server.url)
    generation = await engine.generate(request(max_new_tokens=4))
    await engine.aclose()
    assert generation.output_ids == array("i", expected_ids(4))
    assert generation.output_logprobs == expected_logprobs(4)
    assert generation.finish.kind is FinishKind.LENGTH
    assert (generation.prompt_tokens, generation.cached_tokens) == (len(PROMPT), 3)
    assert generation.weight_versions == ("step-42",)
    assert engine.info.logprob_semantics is LogprobSemantics.AFTER_TEMPERATURE


@pytest.mark.asyncio
async def test_a_matched_stop_token_is_kept_as_the_last_id(sglang_server: FakeServer):
    sglang_server.behaviour.reply_ids = [11, 12, 151645, 13]
    engine = SGLangEngine(sglang_server.url)
    generation = await engine.generate(request(max_new_tokens=10, stop=(151645,)))
    await engine.aclose()
    assert list(generation.output_ids) == [11, 12, 151645]
    assert generation.finish.kind is FinishKind.STOP and generation.finish.matched_token_id == 151645


@pytest.mark.parametrize(("stream_ids", "lengths"), [(1, [1] * 6), (4, [1, 4, 1])], ids=["per-id", "per-4-ids"])
@pytest.mark.parametrize("incremental", [False, True], ids=["cumulative", "incremental"])
@pytest.mark.asyncio
async def test_streaming_yields_only_new_ids_and_equals_the_non_streaming_reply(
    sglang_server: FakeServer, incremental: bool, stream_ids: int, lengths: list[int]
):
    """Events that arrive apart are a chunk each (with `stream_ids`, SGLang's per-request `stream_interval`: the
    first id at once, then every 4th, the finish at once); all at once (no delay), one chunk: the same generation."""
    sglang_server.behaviour.incremental = incremental
    sglang_server.behaviour.token_delay = 0.02
    engine = SGLangEngine(sglang_server.url, stream_ids=stream_ids)
    chunks = [chunk async for chunk in engine.stream(request(max_new_tokens=6))]
    sglang_server.behaviour.token_delay = 0.0
    streamed = await collect_stream(engine.stream(request(max_new_tokens=6)), time.monotonic())
    whole = await engine.generate(request(max_new_tokens=6))
    await engine.aclose()
    assert [len(chunk.ids) for chunk in chunks] == lengths
    assert [chunk.finish is not None for chunk in chunks] == [False] * (len(lengths) - 1) + [True]
    assert sglang_server.requests[0].body["stream"] is True
    assert sglang_server.requests[0].body["sampling_params"].get("stream_interval") == (4 if stream_ids > 1 else None)
    assert "stream_interval" not in sglang_server.requests[2].body["sampling_params"], "only a stream asks for it"
    assert array("i", [i for chunk in chunks for i in chunk.ids]) == streamed.output_ids
    assert streamed.output_ids == whole.output_ids == array("i", expected_ids(6))
    assert streamed.output_logprobs == whole.output_logprobs
    assert streamed.finish == whole.finish and streamed.weight_versions == ("default",)


def test_a_stream_of_one_id_per_event_leaves_sglangs_default_unasked():
    body = generate_body(request(), stream=True)
    assert "stream_interval" not in body["sampling_params"]
    assert generate_body(request(), stream=True, stream_ids=8)["sampling_params"]["stream_interval"] == 8


@pytest.mark.parametrize(
    ("reason", "kind", "token", "text"),
    [
        ({"type": "stop", "matched": 151645}, FinishKind.STOP, 151645, None),
        ({"type": "stop", "matched": "</answer>"}, FinishKind.STOP, None, "</answer>"),
        ({"type": "stop", "matched": None}, FinishKind.STOP, None, None),
        ({"type": "length", "length": 8}, FinishKind.LENGTH, None, None),
        ({"type": "abort", "message": "Aborted", "status_code": None, "err_type": None}, FinishKind.ABORT, None, None),
        ("length", FinishKind.LENGTH, None, None),
    ],
)
def test_every_finish_reason_shape_is_read(reason: object, kind: FinishKind, token: int | None, text: str | None):
    finish = parse_finish_reason(reason)
    assert finish is not None
    assert (finish.kind, finish.matched_token_id, finish.matched_text) == (kind, token, text)


def test_an_unfinished_event_has_no_finish_and_an_unknown_reason_is_an_engine_error():
    assert parse_finish_reason(None) is None
    with pytest.raises(EngineResponseError, match="unknown finish_reason"):
        parse_finish_reason({"type": "exploded"})


def test_an_abort_with_an_error_status_is_the_engines_refusal():
    reason = {"type": "abort", "message": "prompt is longer than the context (9000 > 8192)", "status_code": 400}
    with pytest.raises(EngineRequestError, match="longer than the context") as caught:
        parse_finish_reason(reason)
    assert caught.value.engine_status == 400


@pytest.mark.asyncio
async def test_abort_by_rid_ends_a_running_stream_with_the_ids_so_far(sglang_server: FakeServer):
    sglang_server.behaviour.token_delay = 0.02
    engine = SGLangEngine(sglang_server.url)
    received = []
    async for chunk in engine.stream(request(max_new_tokens=200, rid="s1-t2-b")):
        received.append(chunk)
        if len(received) == 3:
            await engine.abort("s1-t2-b")
    await engine.aclose()
    assert received[-1].finish is not None and received[-1].finish.kind is FinishKind.ABORT
    assert received[-1].finish.detail == "Aborted"
    assert 3 <= sum(len(chunk.ids) for chunk in received) < 200
    assert sglang_server.requests[-1].body == {"rid": "s1-t2-b", "abort_all": False}


@pytest.mark.asyncio
async def test_abort_ends_a_non_streaming_generate_with_the_partial_output(sglang_server: FakeServer):
    sglang_server.behaviour.token_delay = 0.02
    engine = SGLangEngine(sglang_server.url)
    running = asyncio.create_task(engine.generate(request(max_new_tokens=200, rid="s1-t3-c")))
    await asyncio.sleep(0.1)
    await engine.abort("s1-t3-c")
    generation = await asyncio.wait_for(running, 5)
    await engine.aclose()
    assert generation.finish.kind is FinishKind.ABORT
    assert 0 < len(generation.output_ids) < 200


@pytest.mark.parametrize(("status", "error"), [(400, EngineRequestError), (500, EngineResponseError)])
@pytest.mark.asyncio
async def test_an_error_status_is_a_typed_error_carrying_the_engines_words(
    sglang_server: FakeServer, status: int, error: type[Exception]
):
    sglang_server.behaviour.status = status
    engine = SGLangEngine(sglang_server.url)
    for call in (engine.generate(request()), collect_stream(engine.stream(request()), 0.0)):
        with pytest.raises(error, match="out of vocabulary") as caught:
            await call
        assert caught.value.engine_status == status  # type: ignore[attr-defined]
    await engine.aclose()


@pytest.mark.asyncio
async def test_a_malformed_body_names_the_missing_field(sglang_server: FakeServer):
    sglang_server.behaviour.malformed = True
    engine = SGLangEngine(sglang_server.url)
    with pytest.raises(EngineResponseError, match="output_ids"):
        await engine.generate(request())
    with pytest.raises(EngineResponseError, match="output_ids"):
        await collect_stream(engine.stream(request()), 0.0)
    await engine.aclose()


@pytest.mark.asyncio
async def test_a_slow_engine_times_out_with_a_typed_error(sglang_server: FakeServer):
    sglang_server.behaviour.token_delay = 0.5
    engine = SGLangEngine(sglang_server.url, timeout=0.2)
    with pytest.raises(EngineTimeoutError, match="no answer in time"):
        await engine.generate(request(max_new_tokens=3))
    with pytest.raises(EngineTimeoutError):
        await collect_stream(engine.stream(request(max_new_tokens=3)), 0.0)
    await engine.aclose()


@pytest.mark.asyncio
async def test_a_dropped_connection_is_a_reply_cut_short(sglang_server: FakeServer):
    sglang_server.behaviour.drop_connection = True
    engine = SGLangEngine(sglang_server.url)
    for call in (engine.generate(request()), collect_stream(engine.stream(request()), 0.0)):
        with pytest.raises(EngineResponseError, match="cut mid-reply") as raised:
            await call
        assert raised.value.fault == "cut"
    await engine.aclose()


@pytest.mark.asyncio
async def test_connection_refused_is_engine_unavailable_for_every_call():
    engine = SGLangEngine(f"http://127.0.0.1:{free_port()}")
    with pytest.raises(EngineUnavailableError, match="Connect"):
        await engine.generate(request())
    with pytest.raises(EngineUnavailableError):
        await engine.health()
    with pytest.raises(EngineUnavailableError):
        await engine.abort("s1-t1-a")
    await engine.aclose()


@pytest.mark.asyncio
async def test_health_passes_on_a_healthy_server_and_fails_typed_on_503(sglang_server: FakeServer):
    engine = SGLangEngine(sglang_server.url)
    assert engine.info.model == ""
    await engine.health()
    assert engine.info.model == "tiny", "learnt from /get_model_info"
    sglang_server.behaviour.status = 503
    with pytest.raises(EngineUnavailableError):
        await engine.health()
    await engine.aclose()


@pytest.mark.asyncio
async def test_an_error_event_inside_the_stream_is_the_engines_refusal_in_its_words(sglang_server: FakeServer):
    sglang_server.behaviour.stream_error = "The input (9000 tokens) is longer than the model's context length"
    engine = SGLangEngine(sglang_server.url)
    received = []
    with pytest.raises(EngineRequestError, match="longer than the model's context length") as caught:
        async for chunk in engine.stream(request(max_new_tokens=5)):
            received.append(chunk)
    await engine.aclose()
    assert len(received) == 1 and caught.value.engine_status == 400


def test_a_request_aborted_before_prefill_ends_with_abort_and_no_ids() -> None:
    """SGLang answers a request aborted while queued with no `output_ids` and no logprobs at all."""
    reply = {
        "text": "",
        "meta_info": {
            "finish_reason": {"type": "abort", "message": "Abort before prefill"},
            "prompt_tokens": 0,
            "completion_tokens": 0,
        },
    }
    chunk = parse_reply(reply, already_received=0)
    assert chunk.finish is not None and chunk.finish.kind is FinishKind.ABORT
    assert chunk.finish.detail == "Abort before prefill" and len(chunk.ids) == 0 == len(chunk.logprobs)


@pytest.mark.parametrize("incremental", [False, True], ids=["cumulative", "incremental"])
@pytest.mark.asyncio
async def test_top_logprobs_ask_top_logprobs_num_and_read_output_top_logprobs_streamed_or_whole(
    sglang_server: FakeServer, incremental: bool
):
    sglang_server.behaviour.incremental = incremental
    engine = SGLangEngine(sglang_server.url)
    asked = GenerateRequest(PROMPT, SamplingParams(max_new_tokens=4, top_logprobs=3), "r", None)
    whole = await engine.generate(asked)
    streamed = await collect_stream(engine.stream(asked), time.monotonic())
    plain = await engine.generate(request(max_new_tokens=4))
    await engine.aclose()
    assert [r.body["top_logprobs_num"] for r in sglang_server.requests] == [3, 3, 0]
    expected = tuple(tuple(scripted_top_logprobs(token, i, 3)) for i, token in enumerate(expected_ids(4)))
    assert whole.top_logprobs == streamed.top_logprobs == expected
    assert plain.top_logprobs == () and engine.info.max_top_logprobs == 20


def test_a_json_schema_is_sglangs_own_constrained_decoding() -> None:
    from tito.engines.sglang import sampling_params

    schema = '{"type": "object", "properties": {"title": {"type": "string"}}}'
    assert sampling_params(SamplingParams(max_new_tokens=5, json_schema=schema))["json_schema"] == schema
    assert "json_schema" not in sampling_params(SamplingParams(max_new_tokens=5))
    assert SGLangEngine("http://127.0.0.1:9").info.structured_output


@pytest.mark.asyncio
async def test_every_request_decodes_with_sglangs_own_wire_types(sglang_server: FakeServer):
    """tito's /generate bodies (whole and streamed, every sampling option tito sets) and its abort body decode
    with SGLang's generated types; their sampling params reject unknown keys, so a misspelt option fails here."""
    types = sglang_api_types()
    engine = SGLangEngine(sglang_server.url)
    every_option = SamplingParams(
        max_new_tokens=3, temperature=0.5, top_p=0.9, top_k=20, min_p=0.05, stop_token_ids=(151645,),
        stop=("</answer>",), seed=7, presence_penalty=0.1, frequency_penalty=0.2, repetition_penalty=1.1,
        top_logprobs=2, json_schema='{"type": "object"}',
    )  # fmt: skip
    await engine.generate(GenerateRequest(PROMPT, every_option, "s1-t1-a", "s1"))
    await collect_stream(engine.stream(request(max_new_tokens=2, session=None)), 0.0)
    await engine.abort("s1-t1-a")
    await engine.aclose()
    whole, streamed, abort = (recorded.body for recorded in sglang_server.requests)
    decoded = types.GenerateRequest.from_json_value(whole)
    assert (decoded.input_ids, decoded.rid, decoded.routing_key, decoded.stream) == (PROMPT, "s1-t1-a", "s1", False)
    params = decoded.sampling_params
    assert (params.max_new_tokens, params.top_k, params.sampling_seed, params.stop) == (3, 20, 7, ["</answer>"])
    assert (params.json_schema, params.skip_special_tokens, decoded.top_logprobs_num) == (
        '{"type": "object"}',
        False,
        2,
    )
    assert types.GenerateRequest.from_json_value(streamed).stream is True
    assert types.AbortRequest.from_json_value(abort).rid == "s1-t1-a"
