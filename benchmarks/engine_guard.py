"""What the server's engine guard (tito.server.turns.engine_guard) adds to an engine call, side by side in one run.

The guard checks every reply where it enters (ids inside the vocabulary, logprobs finite) and tracks the call so an
abort can end it. Its cost must scale with the reply, never with the history (the prompt). Measured against an
engine that hands back prebuilt replies (so only the guard's own work differs): replies of 16, 1k and 32k ids after
prompts of 1k and 128k ids, whole and streamed (one id per chunk). Targets: at most 0.1 us per sampled id for a
whole reply and 2.5 us per streamed chunk (tito's own streaming costs 5-16 us a chunk, benchmarks/RESULTS.md), and
the same cost after a 128k prompt as after a 1k one (ratio ~1: the guard never reads the prompt).

Run: python benchmarks/engine_guard.py
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import AsyncIterator

from tito.engines.protocol import (
    EngineInfo,
    Finish,
    FinishKind,
    GenerateRequest,
    Generation,
    GenerationChunk,
    LogprobSemantics,
    SamplingParams,
    logprob_values,
    token_ids,
)
from tito.server.metrics import ServerMetrics
from tito.server.turns.engine_guard import GuardedEngine

VOCABULARY = 151_669
ROUNDS = 9
STOP = Finish(FinishKind.STOP, matched_token_id=151645)


class CannedEngine:
    """Hands back one prebuilt reply (whole, or one chunk per id): an engine that costs nothing."""

    def __init__(self, reply_length: int) -> None:
        ids = token_ids([1000 + i % 5000 for i in range(reply_length - 1)] + [151645])
        logprobs = logprob_values([-(i % 7) / 8 for i in range(reply_length)])
        self.generation = Generation(ids, logprobs, STOP, 0)
        self.chunks = [GenerationChunk(ids[i : i + 1], logprobs[i : i + 1]) for i in range(reply_length - 1)]
        self.chunks.append(GenerationChunk(ids[-1:], logprobs[-1:], STOP, 0, 0))
        self.info = EngineInfo("canned", "m", None, LogprobSemantics.AFTER_TEMPERATURE)

    async def generate(self, request: GenerateRequest) -> Generation:
        return self.generation

    async def stream(self, request: GenerateRequest) -> AsyncIterator[GenerationChunk]:
        for chunk in self.chunks:
            yield chunk

    async def health(self) -> None:
        return None

    async def abort(self, request_id: str) -> None:
        return None

    async def aclose(self) -> None:
        return None


async def drain(engine: CannedEngine | GuardedEngine, request: GenerateRequest, mode: str, repeat: int) -> float:
    started = time.perf_counter()
    for _ in range(repeat):
        if mode == "whole":
            await engine.generate(request)
        else:
            async for _chunk in engine.stream(request):
                pass
    return (time.perf_counter() - started) / repeat * 1e6


def best_pair(engine: CannedEngine, request: GenerateRequest, mode: str, repeat: int) -> tuple[float, float]:
    """Bare and guarded microseconds per call: the best of ROUNDS interleaved rounds (garbage collection paused)."""
    guard = GuardedEngine(engine, VOCABULARY, ServerMetrics())
    bare = guarded = float("inf")
    gc.disable()
    try:
        for _ in range(ROUNDS):
            bare = min(bare, asyncio.run(drain(engine, request, mode, repeat)))
            guarded = min(guarded, asyncio.run(drain(guard, request, mode, repeat)))
    finally:
        gc.enable()
    return bare, guarded


def main() -> None:
    print(f"{'prompt':>7} {'reply':>6} {'mode':>6} {'bare us':>9} {'guarded us':>11} {'added us':>9} {'us/id':>6}")
    added: dict[tuple[int, int, str], float] = {}
    for reply_length in (16, 1_024, 32_768):
        engine = CannedEngine(reply_length)
        for mode in ("whole", "stream"):
            for prompt_length in (1_000, 128_000):
                request = GenerateRequest(list(range(prompt_length)), SamplingParams(reply_length), "r")
                repeat = max(5, (200_000 if mode == "whole" else 20_000) // reply_length)
                bare, guarded = best_pair(engine, request, mode, repeat)
                added[prompt_length, reply_length, mode] = guarded - bare
                print(
                    f"{prompt_length:>7} {reply_length:>6} {mode:>6} {bare:>9.1f} {guarded:>11.1f} "
                    f"{guarded - bare:>9.1f} {(guarded - bare) / reply_length:>6.3f}"
                )
    print("\nadded after a 128k prompt / added after a 1k prompt (the guard never reads the prompt):")
    for reply_length in (16, 1_024, 32_768):
        for mode in ("whole", "stream"):
            ratio = added[128_000, reply_length, mode] / added[1_000, reply_length, mode]
            print(f"  reply {reply_length:>6} {mode:>6}: {ratio:.2f}")


if __name__ == "__main__":
    main()
