"""Engine speed: the embedded `local` engine's decode throughput and what its per-session prefix cache saves.

For each model (the seeded tiny Qwen3 on the real Qwen3 vocabulary, and SmolLM2-135M-Instruct), one run measures:
  tok/s bs1 / bs8   sampled ids per second, one request alone and 8 concurrent requests (total), seeded sampling
                    at temperature 1 after a 32-id prompt, no stop token (every request samples --new-tokens ids)
  session           a 10-turn session (each turn appends --turn-tokens prompt ids after the previous prompt and
                    reply, then samples --sampled-per-turn ids), with the prefix cache (one session id) and
                    without (no session id): prompt ids prefilled, prefill seconds, their ratio, total seconds

Run: python benchmarks/engines.py [--models tiny smollm2] [--new-tokens 64] [--turn-tokens 500] [--sampled-per-turn 50]
     [--threads N]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tito.engines.local import LocalEngine, build_tiny_model, default_model_dir
from tito.engines.protocol import GenerateRequest, SamplingParams
from tito.tokenizer_loading import load_tokenizer


def local_engine(model: str, workdir: Path, threads: int | None = None) -> LocalEngine:
    """`tiny`: the seeded tiny Qwen3 (2 layers, hidden 64, Qwen3 vocabulary); `smollm2`: the default model."""
    if model == "tiny":
        directory = build_tiny_model(load_tokenizer("qwen3"), workdir / "tiny", seed=0)
        return LocalEngine.from_model_dir(directory, threads=threads)
    return LocalEngine.from_model_dir(default_model_dir(), threads=threads)


def _sampled(
    prompt_ids: list[int], new_tokens: int, seed: int, request_id: str, session_id: str | None = None
) -> GenerateRequest:
    params = SamplingParams(max_new_tokens=new_tokens, temperature=1.0, seed=seed)
    return GenerateRequest(prompt_ids, params, request_id, session_id)


def local_tokens_per_second(engine: LocalEngine, batch: int, new_tokens: int, vocab: int) -> float:
    """Sampled ids per second over `batch` concurrent requests (total), prefill of a 32-id prompt included."""
    rng = random.Random(batch)
    requests = [
        _sampled([rng.randrange(vocab) for _ in range(32)], new_tokens, i, f"tps-{batch}-{i}") for i in range(batch)
    ]

    async def run() -> int:
        generations = await asyncio.gather(*(engine.generate(request) for request in requests))
        return sum(len(generation.output_ids) for generation in generations)

    started = time.perf_counter()
    sampled = asyncio.run(run())
    return sampled / (time.perf_counter() - started)


@dataclass(frozen=True)
class SessionCost:
    prefill_tokens: int
    prefill_seconds: float
    total_seconds: float
    cached_tokens: int


def local_session_cost(
    engine: LocalEngine, use_prefix_cache: bool, turns: int, turn_tokens: int, sampled_per_turn: int, vocab: int
) -> SessionCost:
    """One multi-turn session: each turn's prompt is the last prompt + its reply + `turn_tokens` new ids."""
    rng = random.Random(0)
    session_id = f"bench-{time.monotonic_ns()}" if use_prefix_cache else None
    prompt: list[int] = []
    cached = 0
    before_tokens, before_seconds = engine.stats.prefill_tokens, engine.stats.prefill_seconds
    started = time.perf_counter()
    for turn in range(turns):
        prompt = prompt + [rng.randrange(vocab) for _ in range(turn_tokens)]
        request = _sampled(prompt, sampled_per_turn, turn, f"{session_id or 'nocache'}-{turn}", session_id)
        generation = asyncio.run(engine.generate(request))
        cached += generation.cached_tokens
        prompt = prompt + generation.output_ids.tolist()
    return SessionCost(
        engine.stats.prefill_tokens - before_tokens,
        engine.stats.prefill_seconds - before_seconds,
        time.perf_counter() - started,
        cached,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", choices=("tiny", "smollm2"), default=["tiny", "smollm2"])
    parser.add_argument("--new-tokens", type=int, default=64, help="ids sampled per request for tok/s [64]")
    parser.add_argument("--turns", type=int, default=10, help="turns of the session [10]")
    parser.add_argument("--turn-tokens", type=int, default=500, help="new prompt ids per turn [500]")
    parser.add_argument("--sampled-per-turn", type=int, default=50, help="ids sampled per turn [50]")
    parser.add_argument("--threads", type=int, default=None, help="torch threads [torch's default: one per core]")
    args = parser.parse_args()
    print(
        f"{'model':8} {'tok/s bs1':>9} {'tok/s bs8':>9} {'prefilled':>17} {'prefill s':>15} "
        f"{'prefill ratio':>13} {'session s':>13}"
    )
    with tempfile.TemporaryDirectory() as workdir:
        for model in args.models:
            engine = local_engine(model, Path(workdir), args.threads)
            vocab = engine.vocab_size
            local_tokens_per_second(engine, 1, 4, vocab)  # warm-up: first-touch of the weights
            single = local_tokens_per_second(engine, 1, args.new_tokens, vocab)
            batched = local_tokens_per_second(engine, 8, args.new_tokens, vocab)
            shape = (args.turns, args.turn_tokens, args.sampled_per_turn, vocab)
            fresh = local_session_cost(engine, False, *shape)
            reused = local_session_cost(engine, True, *shape)
            asyncio.run(engine.aclose())
            print(
                f"{model:8} {single:9.1f} {batched:9.1f} {fresh.prefill_tokens:>8}/{reused.prefill_tokens:<8} "
                f"{fresh.prefill_seconds:7.2f}/{reused.prefill_seconds:<7.2f} "
                f"{fresh.prefill_seconds / reused.prefill_seconds:13.1f} "
                f"{fresh.total_seconds:6.1f}/{reused.total_seconds:<6.1f}",
                flush=True,
            )
    print("prefilled, prefill s, session s: without / with the prefix cache", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
