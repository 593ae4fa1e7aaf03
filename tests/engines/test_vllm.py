"""VLLMEngine against an in-test server speaking vLLM's recorded formats (research/engines.md section 2)."""

from __future__ import annotations

import asyncio
import json
import time
from array import array

import pytest

from tests.engines.fake_engine import FakeServer, scripted_id, scripted_logprob, scripted_top_logprobs
from tests.engines.servers import free_port
from tito.engines.factory import create_engine
from tito.engines.protocol import Engine, FinishKind, GenerateRequest, LogprobSemantics, SamplingParams, collect_stream
from tito.engines.vllm import VLLMEngine, _usage, completion_top_logprobs, parse_finish
from tito.errors import (
    ConfigurationError,
    EngineRequestError,
    EngineResponseError,
    EngineTimeoutError,
    EngineUnavailableError,
)

PROMPT = [151644, 84, 82, 68, 81, 198, 151645, 198, 151644, 64, 198]


def request(max_new_tokens: int = 4, stop: tuple[int, ...] = (), rid: str = "r1") -> GenerateRequest:
    sampling = SamplingParams(max_new_tokens=max_new_tokens, stop_token_ids=stop, seed=7, top_k=20)
    return GenerateRequest(PROMPT, sampling, rid, "s1")


def expected_ids(count: int) -> array[int]:
    return array("i", [scripted_id(PROMPT, i) for i in range(count)])


@pytest.mark.asyncio
async def test_the_completions_request_sends_a_token_id_prompt_and_asks_for_ids_and_sampled_logprobs(
    vllm_server: FakeServer,
):
    engine = VLLMEngine(vllm_server.url)
    await engine.generate(request(stop=(151645,)))
    await engine.aclose()
    body = vllm_server.requests[0].body
    assert body["model"] == "tiny", "the model name comes from GET /v1/models"
    assert body["prompt"] == PROMPT and body["max_tokens"] == 4
    assert body["return_token_ids"] is True and body["logprobs"] == 0
    assert body["stop_token_ids"] == [151645] and body["skip_special_tokens"] is False
    assert body["seed"] == 7 and body["top_k"] == 20 and body["request_id"] == "r1"


@pytest.mark.asyncio
async def test_generate_reads_ids_logprobs_usage_and_cached_tokens(vllm_server: FakeServer):
    engine = VLLMEngine(vllm_server.url)
    generation = await engine.generate(request())
    await engine.aclose()
    assert generation.output_ids == expected_ids(4)
    assert generation.output_logprobs == array("f", [scripted_logprob(i) for i in range(4)])
    assert generation.finish.kind is FinishKind.LENGTH
    assert (generation.prompt_tokens, generation.cached_tokens) == (len(PROMPT), 16)
    assert engine.info.logprob_semantics is LogprobSemantics.BEFORE_TEMPERATURE
    assert (engine.info.model, engine.info.max_context) == ("tiny", 2048)


@pytest.mark.asyncio
async def test_a_stop_token_is_kept_and_named_by_stop_reason(vllm_server: FakeServer):
    vllm_server.behaviour.reply_ids = [103095, 8763, 134855]
    engine = VLLMEngine(vllm_server.url)
    generation = await engine.generate(request(max_new_tokens=10, stop=(8763,)))
    await engine.aclose()
    assert list(generation.output_ids) == [103095, 8763]
    assert generation.finish.kind is FinishKind.STOP and generation.finish.matched_token_id == 8763


@pytest.mark.parametrize("usage_chunk", [True, False], ids=["with-usage-chunk", "without"])
@pytest.mark.asyncio
async def test_streaming_deltas_accumulate_to_the_non_streaming_reply(vllm_server: FakeServer, usage_chunk: bool):
    vllm_server.behaviour.usage_chunk = usage_chunk
    engine = VLLMEngine(vllm_server.url)
    chunks = [chunk async for chunk in engine.stream(request(max_new_tokens=5))]
    streamed = await collect_stream(engine.stream(request(max_new_tokens=5)), time.monotonic())
    whole = await engine.generate(request(max_new_tokens=5))
    await engine.aclose()
    assert sum(len(chunk.ids) for chunk in chunks) == 5 and chunks[-1].finish is not None
    assert all(chunk.finish is None for chunk in chunks[:-1])
    assert vllm_server.requests[0].body["stream_options"] == {"include_usage": True}
    assert streamed.output_ids == whole.output_ids == expected_ids(5)
    assert streamed.output_logprobs == whole.output_logprobs and streamed.finish == whole.finish
    assert streamed.cached_tokens == (16 if usage_chunk else 0)


@pytest.mark.asyncio
async def test_the_generate_endpoint_sends_token_ids_and_reads_integer_logprobs_and_weight_versions(
    vllm_server: FakeServer,
):
    vllm_server.behaviour.weight_version = "v3"
    engine = VLLMEngine(vllm_server.url, model="tiny", endpoint="generate")
    generation = await engine.generate(request())
    await engine.aclose()
    sent = vllm_server.requests[0]
    assert sent.path == "/inference/v1/generate"
    assert sent.body["token_ids"] == PROMPT and sent.body["output_mode"] == "tokens"
    assert sent.body["sampling_params"]["logprobs"] == 0 and sent.body["sampling_params"]["max_tokens"] == 4
    assert generation.output_ids == expected_ids(4) and generation.weight_versions == ("v3",)
    assert generation.output_logprobs == array("f", [scripted_logprob(i) for i in range(4)])


@pytest.mark.asyncio
async def test_abort_on_the_generate_endpoint_calls_abort_requests_with_vllms_prefixed_id(vllm_server: FakeServer):
    vllm_server.behaviour.token_delay = 0.02
    engine = VLLMEngine(vllm_server.url, model="tiny", endpoint="generate")
    running = asyncio.create_task(engine.generate(request(max_new_tokens=100, rid="r9")))
    await asyncio.sleep(0.1)
    await engine.abort("r9")
    generation = await asyncio.wait_for(running, 5)
    await engine.aclose()
    assert generation.finish.kind is FinishKind.ABORT
    assert vllm_server.requests[-1].body == {"request_ids": ["generate-tokens-r9"]}


@pytest.mark.asyncio
async def test_abort_drops_a_running_stream_and_ends_it_with_the_ids_so_far(vllm_server: FakeServer):
    vllm_server.behaviour.token_delay = 0.05
    engine = VLLMEngine(vllm_server.url, model="tiny")
    chunks = []
    async for chunk in engine.stream(request(max_new_tokens=100, rid="r2")):
        chunks.append(chunk)
        if len(chunks) == 2:
            asyncio.get_running_loop().call_later(0.01, lambda: asyncio.ensure_future(engine.abort("r2")))
    await engine.aclose()
    assert chunks[-1].finish is not None and chunks[-1].finish.kind is FinishKind.ABORT
    assert 2 <= sum(len(chunk.ids) for chunk in chunks) < 100


@pytest.mark.asyncio
async def test_abort_ends_a_waiting_non_streaming_call_at_once(vllm_server: FakeServer):
    vllm_server.behaviour.token_delay = 0.1
    engine = VLLMEngine(vllm_server.url, model="tiny")
    running = asyncio.create_task(engine.generate(request(max_new_tokens=20, rid="r3")))
    await asyncio.sleep(0.1)
    await engine.abort("r3")
    generation = await asyncio.wait_for(running, 1)  # the server would answer after 2 s
    await engine.aclose()
    assert generation.finish.kind is FinishKind.ABORT and len(generation.output_ids) == 0


@pytest.mark.parametrize(
    ("reason", "stop_reason", "kind", "token", "text"),
    [
        ("stop", 8763, FinishKind.STOP, 8763, None),
        ("stop", "</s>", FinishKind.STOP, None, "</s>"),
        ("stop", None, FinishKind.STOP, None, None),
        ("length", None, FinishKind.LENGTH, None, None),
        ("abort", None, FinishKind.ABORT, None, None),
    ],
)
def test_every_finish_reason_shape_is_read(reason: str, stop_reason: object, kind: FinishKind, token, text):
    finish = parse_finish(reason, stop_reason)
    assert finish is not None
    assert (finish.kind, finish.matched_token_id, finish.matched_text) == (kind, token, text)


def test_unfinished_and_unknown_finish_reasons():
    assert parse_finish(None, None) is None
    with pytest.raises(EngineResponseError, match="unknown finish_reason"):
        parse_finish("tool_calls", None)


@pytest.mark.parametrize(("status", "error"), [(400, EngineRequestError), (500, EngineResponseError)])
@pytest.mark.asyncio
async def test_an_error_status_is_a_typed_error_with_vllms_message(
    vllm_server: FakeServer, status: int, error: type[Exception]
):
    vllm_server.behaviour.status = status
    engine = VLLMEngine(vllm_server.url, model="tiny")
    for call in (engine.generate(request()), collect_stream(engine.stream(request()), 0.0)):
        with pytest.raises(error, match="Token id 999999 is out of vocabulary"):
            await call
    await engine.aclose()


@pytest.mark.asyncio
async def test_malformed_slow_and_dropped_replies_are_typed_errors(vllm_server: FakeServer):
    engine = VLLMEngine(vllm_server.url, model="tiny", timeout=0.3)
    vllm_server.behaviour.malformed = True
    with pytest.raises(EngineResponseError, match="token_ids"):
        await engine.generate(request())
    vllm_server.reset()
    vllm_server.behaviour.token_delay = 0.5
    with pytest.raises(EngineTimeoutError):
        await engine.generate(request())
    vllm_server.reset()
    vllm_server.behaviour.drop_connection = True
    for call in (engine.generate(request()), collect_stream(engine.stream(request()), 0.0)):
        with pytest.raises(EngineResponseError, match="cut mid-reply") as raised:
            await call
        assert raised.value.fault == "cut"
    await engine.aclose()


@pytest.mark.asyncio
async def test_connection_refused_is_engine_unavailable():
    engine = VLLMEngine(f"http://127.0.0.1:{free_port()}")
    with pytest.raises(EngineUnavailableError, match="Connect"):
        await engine.generate(request())
    with pytest.raises(EngineUnavailableError):
        await engine.health()
    await engine.aclose()


def test_the_factory_builds_both_http_engines_and_rejects_an_unknown_vllm_endpoint():
    vllm, sglang = create_engine("vllm", url="http://127.0.0.1:1", timeout=5), create_engine("sglang", url="http://x")
    assert isinstance(vllm, VLLMEngine) and isinstance(vllm, Engine) and isinstance(sglang, Engine)
    assert sglang.info.name == "sglang" and vllm.info.name == "vllm"
    with pytest.raises(ConfigurationError, match="endpoint"):
        VLLMEngine("http://127.0.0.1:1", endpoint="chat")  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_an_error_event_inside_the_stream_is_a_typed_error_with_its_code(vllm_server: FakeServer):
    vllm_server.behaviour.stream_error = "EngineCore encountered an issue"
    engine = VLLMEngine(vllm_server.url, model="tiny")
    with pytest.raises(EngineResponseError, match="EngineCore encountered an issue") as caught:
        await collect_stream(engine.stream(request()), 0.0)
    await engine.aclose()
    assert caught.value.engine_status == 500


def test_usage_with_null_counts_falls_back_to_the_prompt_length() -> None:
    assert _usage({"prompt_tokens": None, "prompt_tokens_details": None}, 7) == (7, 0)
    assert _usage({"prompt_tokens": 9, "prompt_tokens_details": {"cached_tokens": 4}}, 7) == (9, 4)


@pytest.mark.parametrize("endpoint", ["completions", "generate"])
@pytest.mark.asyncio
async def test_top_logprobs_ask_logprobs_k_with_id_keys_and_read_k_per_position(vllm_server: FakeServer, endpoint: str):
    engine = VLLMEngine(vllm_server.url, endpoint=endpoint)  # type: ignore[arg-type]
    asked = GenerateRequest(PROMPT, SamplingParams(max_new_tokens=4, top_logprobs=3), "r", None)
    whole = await engine.generate(asked)
    await engine.aclose()
    expected = tuple(tuple(scripted_top_logprobs(token, i, 3)) for i, token in enumerate(expected_ids(4)))
    assert whole.top_logprobs == expected and engine.info.max_top_logprobs == 20
    body = vllm_server.requests[-1].body
    if endpoint == "completions":
        assert (body["logprobs"], body["return_tokens_as_token_ids"]) == (3, True)
    else:
        assert body["sampling_params"]["logprobs"] == 3


@pytest.mark.asyncio
async def test_streamed_top_logprobs_equal_the_whole_replys(vllm_server: FakeServer):
    engine = VLLMEngine(vllm_server.url)
    asked = GenerateRequest(PROMPT, SamplingParams(max_new_tokens=4, top_logprobs=2), "r", None)
    streamed = await collect_stream(engine.stream(asked), time.monotonic())
    whole = await engine.generate(asked)
    plain = await engine.generate(request())
    await engine.aclose()
    assert streamed.top_logprobs == whole.top_logprobs and len(whole.top_logprobs) == 4
    assert plain.top_logprobs == () and "return_tokens_as_token_ids" not in vllm_server.requests[-1].body


def test_the_sampled_token_vllm_adds_to_the_top_k_is_dropped_when_it_is_not_among_them():
    choice = {"logprobs": {"top_logprobs": [{"token_id:5": -3.0, "token_id:7": -0.5, "token_id:9": -1.0}]}}
    assert completion_top_logprobs(choice, 2) == (((7, -0.5), (9, -1.0)),)


def test_a_json_schema_is_vllms_own_structured_outputs_in_both_bodies() -> None:
    from tito.engines.vllm import completions_body, generate_body

    schema = {"type": "object", "properties": {"title": {"type": "string"}}}
    asked = GenerateRequest([1, 2], SamplingParams(max_new_tokens=5, json_schema=json.dumps(schema)), "r")
    assert completions_body(asked, "m", stream=False)["structured_outputs"] == {"json": schema}
    assert generate_body(asked, "m")["sampling_params"]["structured_outputs"] == {"json": schema}
    plain = GenerateRequest([1, 2], SamplingParams(max_new_tokens=5), "r")
    assert "structured_outputs" not in completions_body(plain, "m", stream=True)
    assert VLLMEngine("http://127.0.0.1:9").info.structured_output
