"""Streaming cost in the server: tito's added time per SSE chunk and the time to the first chunk (issue #12).

The server part of issue #12's streaming benchmark (benchmarks/streaming.py measures the parse alone). A
qwen3 completion (long reasoning, a short answer, two parallel tool calls with nested arguments) is streamed
through `tito.server.streaming.stream_turn`, the code a `stream: true` request runs, from an in-process engine
that hands out prepared chunks of 1 or 16 ids at no cost, so every microsecond measured is tito's:
  whole        parse_completion of all the ids (what the non-streaming path parses)
  turn         the whole streamed turn (watch, parse, delta merge, SSE encoding, ids collection, build and
               commit of the turn), per chunk = turn / chunks
  first        from the engine handing out its first ids to the SSE event that carries them leaving tito
Targets: at most 25 us added per chunk; first chunk within 2 ms of the engine's first ids; the summed streaming
parse within 3x of the whole parse at 16-id chunks (benchmarks/streaming.py).
Run from the repository root:
  PYTHONPATH=src python benchmarks/streaming_server.py [--sizes 500 4000] [--runs 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the test support module below

from benchmarks.parsing import PARAGRAPH, assistant, best_seconds
from tests.parsing.cases import TOOLS, get_case, render_completion

from tito.engines.instant import InstantEngine
from tito.engines.protocol import Finish, FinishKind, GenerateRequest, GenerationChunk, logprob_values, token_ids
from tito.server import ServerOptions, ServerState
from tito.server.completions import PreparedTurn, fingerprint, parse_chat_request, prepare_turn
from tito.server.streaming import stream_turn
from tito.trajectory.events import SessionConfig

TARGET_CHUNK_US = 25.0
TARGET_FIRST_MS = 2.0
CHUNK_SIZES = (1, 16)


class ChunkedEngine(InstantEngine):
    """Streams prepared ids in fixed chunks at once, noting when it hands out the first ids."""

    def __init__(self, ids: list[int], chunk_size: int) -> None:
        super().__init__(ids)
        self.chunks = [
            GenerationChunk(token_ids(ids[i : i + chunk_size]), logprob_values([-0.5] * len(ids[i : i + chunk_size])))
            for i in range(0, len(ids), chunk_size)
        ]
        self.first_ids_at = 0.0

    async def stream(self, request: GenerateRequest) -> AsyncIterator[GenerationChunk]:
        self.first_ids_at = time.perf_counter()
        for chunk in self.chunks:
            yield chunk
        yield GenerationChunk(token_ids(), logprob_values(), Finish(FinishKind.STOP), len(request.prompt_ids), 0)


async def never_disconnects() -> dict[str, Any]:
    await asyncio.Event().wait()
    return {"type": "http.disconnect"}


async def prepared_turn(state: ServerState) -> PreparedTurn:
    session = await state.registry.create(SessionConfig())
    body = orjson.dumps({"messages": [{"role": "user", "content": "go"}], "tools": TOOLS, "stream": True})
    prepared = await prepare_turn(state, session, parse_chat_request(body), fingerprint(body), False)
    assert isinstance(prepared, PreparedTurn)
    return prepared


async def one_turn(state: ServerState, engine: ChunkedEngine) -> tuple[float, float, int]:
    """The turn's seconds, the seconds from the engine's first ids to their event, and the events sent."""
    prepared = await prepared_turn(state)
    events = 0
    first = 0.0
    start = time.perf_counter()
    async for event in stream_turn(state, prepared, never_disconnects):
        events += 1
        if events == 2:  # the first event after the role chunk: the first decided delta (an upper bound)
            first = time.perf_counter() - engine.first_ids_at
        assert not event.startswith(b"event: error"), event
    return time.perf_counter() - start, first, events


def measure(size: int, chunk_size: int, runs: int) -> dict[str, float]:
    case = get_case("qwen3")
    per_paragraph = len(case.tokenizer.encode(PARAGRAPH, add_special_tokens=False))
    ids = render_completion(case, assistant(case, max(1, size // per_paragraph))).completion_ids
    engine = ChunkedEngine(list(ids), chunk_size)
    state = ServerState(case.tokenizer, engine, ServerOptions(family="qwen3"))
    results = [asyncio.run(one_turn(state, engine)) for _ in range(runs)]
    prompt_ids = asyncio.run(prepared_turn(state)).prompt_ids
    whole = best_seconds(lambda: case.tito.parse_completion(ids, prompt_ids, TOOLS))
    turn = min(result[0] for result in results)
    return {
        "tokens": len(ids),
        "whole": whole,
        "turn": turn,
        "chunk": turn / len(engine.chunks),
        "first": statistics.median(result[1] for result in results),
        "events": results[0][2],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", type=int, default=[500, 4000])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    print(f"{'tokens':>7} {'chunk':>5} {'whole us':>9} {'turn us':>9} {'events':>6} {'us/chunk':>9} {'first ms':>9}")
    worst_chunk = worst_first = 0.0
    for size in args.sizes:
        for chunk_size in CHUNK_SIZES:
            row = measure(size, chunk_size, args.runs)
            worst_chunk = max(worst_chunk, row["chunk"] * 1e6)
            worst_first = max(worst_first, row["first"] * 1e3)
            print(
                f"{row['tokens']:7.0f} {chunk_size:5} {row['whole'] * 1e6:9.1f} {row['turn'] * 1e6:9.1f} "
                f"{row['events']:6.0f} {row['chunk'] * 1e6:9.2f} {row['first'] * 1e3:9.3f}",
                flush=True,
            )
    passed = worst_chunk <= TARGET_CHUNK_US and worst_first <= TARGET_FIRST_MS
    print(
        f"\nworst us/chunk = {worst_chunk:.1f} (<= {TARGET_CHUNK_US}), worst first chunk = {worst_first:.3f} ms "
        f"(<= {TARGET_FIRST_MS}): {'PASS' if passed else 'MISS'}"
    )
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
