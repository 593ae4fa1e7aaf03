"""The local engine on the seeded tiny Qwen3 (real Qwen3 vocabulary): protocol, sampling, prefix cache, errors."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from tests.engines.local.helpers import forward_logprobs, make_request
from tito.engines.local import LocalEngine
from tito.engines.protocol import Finish, FinishKind, Generation, GenerationChunk, collect_stream
from tito.errors import EngineRequestError, EngineUnavailableError
from tito.tokenizer_loading import LocalTokenizer

PROMPT = [151644, 872, 198, 9707, 1879, 0, 151645, 198, 151644, 77091, 198]


def generate(engine: LocalEngine, prompt: list[int], session_id: str | None = None, **sampling: object) -> Generation:
    return asyncio.run(engine.generate(make_request(prompt, session_id, **sampling)))


def test_greedy_logprobs_match_a_plain_forward_pass(tiny_engine: LocalEngine, tiny_model_dir: Path) -> None:
    generation = generate(tiny_engine, PROMPT, max_new_tokens=6)
    assert len(generation.output_ids) == 6 and generation.finish.kind is FinishKind.LENGTH
    expected = forward_logprobs(tiny_model_dir, PROMPT, generation.output_ids)
    assert generation.output_logprobs.tolist() == pytest.approx(expected, abs=1e-4)
    assert generation.prompt_tokens == len(PROMPT)


def test_sampled_logprobs_are_after_temperature(tiny_engine: LocalEngine, tiny_model_dir: Path) -> None:
    generation = generate(tiny_engine, PROMPT, max_new_tokens=5, temperature=0.7, seed=3)
    expected = forward_logprobs(tiny_model_dir, PROMPT, generation.output_ids, temperature=0.7)
    assert generation.output_logprobs.tolist() == pytest.approx(expected, abs=1e-4)


def test_greedy_top_logprobs_lead_with_the_sampled_id_streamed_or_whole(tiny_engine: LocalEngine) -> None:
    generation = generate(tiny_engine, PROMPT, max_new_tokens=4, top_logprobs=3)
    assert len(generation.top_logprobs) == 4 and all(len(top) == 3 for top in generation.top_logprobs)
    for token, logprob, top in zip(
        generation.output_ids, generation.output_logprobs, generation.top_logprobs, strict=True
    ):
        assert top[0][0] == token and top[0][1] == pytest.approx(logprob, abs=1e-6)
        assert [value for _, value in top] == sorted((value for _, value in top), reverse=True)
    streamed = asyncio.run(
        collect_stream(tiny_engine.stream(make_request(PROMPT, top_logprobs=3, max_new_tokens=4)), 0.0)
    )
    assert [[token for token, _ in top] for top in streamed.top_logprobs] == [
        [token for token, _ in top] for top in generation.top_logprobs
    ]


def test_a_seed_gives_the_same_ids_alone_and_among_concurrent_requests(tiny_engine: LocalEngine) -> None:
    alone = generate(tiny_engine, PROMPT, max_new_tokens=12, temperature=1.0, seed=11)

    async def crowd() -> list[Generation]:
        requests = [make_request(PROMPT, max_new_tokens=12, temperature=1.0, seed=seed) for seed in range(11, 19)]
        return await asyncio.gather(*(tiny_engine.generate(request) for request in requests))

    together = asyncio.run(crowd())
    assert together[0].output_ids == alone.output_ids
    assert together[0].output_logprobs.tolist() == pytest.approx(alone.output_logprobs.tolist(), abs=1e-5)
    assert len({tuple(g.output_ids) for g in together}) > 1, "different seeds should sample different ids"


def test_stream_sends_each_id_as_sampled_and_collects_to_generate(tiny_engine: LocalEngine) -> None:
    async def chunks() -> list[GenerationChunk]:
        return [chunk async for chunk in tiny_engine.stream(make_request(PROMPT, max_new_tokens=4))]

    streamed = asyncio.run(chunks())
    assert [len(chunk.ids) for chunk in streamed] == [1, 1, 1, 1]
    assert [chunk.finish is not None for chunk in streamed] == [False, False, False, True]
    whole = generate(tiny_engine, PROMPT, max_new_tokens=4)
    assert [i for chunk in streamed for i in chunk.ids] == whole.output_ids.tolist()


def test_a_stop_token_ends_the_reply_and_is_kept_last(tiny_engine: LocalEngine) -> None:
    free = generate(tiny_engine, PROMPT, max_new_tokens=6, temperature=1.0, seed=5)
    stop = free.output_ids[3]
    stopped = generate(tiny_engine, PROMPT, max_new_tokens=6, temperature=1.0, seed=5, stop_token_ids=(stop,))
    cut = free.output_ids.tolist().index(stop) + 1
    assert stopped.output_ids.tolist() == free.output_ids.tolist()[:cut]
    assert stopped.finish.kind is FinishKind.STOP and stopped.finish.matched_token_id == stop


def test_a_stop_string_ends_the_reply(tiny_engine: LocalEngine, qwen3_tokenizer: LocalTokenizer) -> None:
    free = generate(tiny_engine, PROMPT, max_new_tokens=6, temperature=1.0, seed=5)
    text = qwen3_tokenizer.decode(free.output_ids[2:3])
    stopped = generate(tiny_engine, PROMPT, max_new_tokens=6, temperature=1.0, seed=5, stop=(text,))
    assert stopped.finish.kind is FinishKind.STOP and stopped.finish.matched_text == text
    assert len(stopped.output_ids) <= 3
    assert text in qwen3_tokenizer.decode(stopped.output_ids)


def test_max_new_tokens_zero_samples_nothing(tiny_engine: LocalEngine) -> None:
    generation = generate(tiny_engine, PROMPT, max_new_tokens=0)
    assert len(generation.output_ids) == 0 and generation.finish.kind is FinishKind.LENGTH


def test_a_session_turn_prefills_only_its_new_tokens(tiny_engine: LocalEngine, tiny_model_dir: Path) -> None:
    first = generate(tiny_engine, PROMPT, session_id="cache-session", max_new_tokens=5)
    assert first.cached_tokens == 0
    second_prompt = [*PROMPT, *first.output_ids, 151645, 198, 151644, 872, 198, 3838, 151645, 198, 151644, 77091, 198]
    before = tiny_engine.stats.prefill_tokens
    second = generate(tiny_engine, second_prompt, session_id="cache-session", max_new_tokens=5)
    reused = len(PROMPT) + len(first.output_ids) - 1  # the last sampled id was never fed to the model
    assert second.cached_tokens == reused
    assert tiny_engine.stats.prefill_tokens - before == len(second_prompt) - reused
    expected = forward_logprobs(tiny_model_dir, second_prompt, second.output_ids)
    assert second.output_logprobs.tolist() == pytest.approx(expected, abs=1e-4)


def test_a_rewritten_history_reuses_only_the_common_prefix(tiny_engine: LocalEngine) -> None:
    generate(tiny_engine, PROMPT, session_id="rewrite-session", max_new_tokens=3)
    rewritten = [*PROMPT[:4], 1234, *PROMPT[5:]]
    again = generate(tiny_engine, rewritten, session_id="rewrite-session", max_new_tokens=3)
    assert again.cached_tokens == 4
    assert again.output_ids == generate(tiny_engine, rewritten, max_new_tokens=3).output_ids


def test_abort_ends_a_running_stream_with_the_ids_so_far(tiny_engine: LocalEngine) -> None:
    async def aborted() -> tuple[list[int], Finish | None]:
        request = make_request(PROMPT, max_new_tokens=10_000, temperature=1.0, seed=1)
        ids: list[int] = []
        finish = None
        async for chunk in tiny_engine.stream(request):
            ids.extend(chunk.ids)
            if len(ids) == 1:
                await tiny_engine.abort(request.request_id)
            finish = chunk.finish
        return ids, finish

    ids, finish = asyncio.run(aborted())
    assert finish is not None and finish.kind is FinishKind.ABORT
    assert 1 <= len(ids) < 10_000


@pytest.mark.parametrize(
    ("prompt", "sampling", "words"),
    [
        ([], {}, "no ids"),
        ([1, 10**7], {}, "position 1 is outside the vocabulary"),
        (PROMPT, {"temperature": -1.0}, "temperature"),
        (PROMPT, {"top_p": 0.0}, "top_p"),
        (PROMPT, {"top_k": 0}, "top_k"),
    ],
)
def test_bad_requests_are_refused_by_name(
    tiny_engine: LocalEngine, prompt: list[int], sampling: dict[str, object], words: str
) -> None:
    with pytest.raises(EngineRequestError, match=words) as raised:
        generate(tiny_engine, prompt, **sampling)
    assert raised.value.http_status == 400


def test_stop_strings_without_a_tokenizer_are_refused(tiny_model_dir: Path) -> None:
    engine = LocalEngine.from_model_dir(tiny_model_dir)
    try:
        with pytest.raises(EngineRequestError, match="stop strings"):
            generate(engine, PROMPT, stop=("x",))
    finally:
        asyncio.run(engine.aclose())
    with pytest.raises(EngineUnavailableError, match="closed"):
        asyncio.run(engine.health())


def test_importing_tito_does_not_import_torch() -> None:
    code = "import tito, tito.engines, tito.engines.factory, sys; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_engine_factory_passes_threads_to_torch(tiny_model_dir: Path) -> None:
    import torch

    from tito.engines.factory import create_engine

    before = torch.get_num_threads()
    engine = create_engine("local", model_dir=tiny_model_dir, threads=before + 1)
    try:
        assert torch.get_num_threads() == before + 1
    finally:
        asyncio.run(engine.aclose())
        torch.set_num_threads(before)
