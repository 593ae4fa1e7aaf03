"""Streaming cost (issue #12): the incremental parse per family, and tito's added time per SSE chunk in the server.

Both sections stream the completion of benchmarks/parsing.py (long reasoning, a short answer, two parallel tool
calls with nested arguments) in chunks of 1 and 16 ids; `whole` is TitoTokenizer.parse_completion of all its ids.

Section `parse`, for each family and size:
  stream@k   TitoTokenizer.incremental_parser(prompt_ids, tools): feed(chunk) per k-id chunk, then finish()
  Reported: the summed streaming parse, the added time per chunk (summed / chunks), and finish() alone.
  Targets: summed stream@16 / whole <= 3; per chunk well under 25 us.
Section `server` (qwen3): the completion streamed through `tito.server.turns.streaming.stream_turn`, the code a
`stream: true` request runs, from an in-process engine that hands out prepared chunks at no cost, so every
microsecond measured is tito's:
  turn       the whole streamed turn (abort watch, parse, delta merge, SSE encoding, ids collection, build and
             commit of the turn), per chunk = turn / chunks
  first      from the engine handing out its first ids to the SSE event that carries them leaving tito
  Targets: at most 25 us added per chunk; first chunk within 2 ms of the engine's first ids.

Run from the repository root:
  PYTHONPATH=src python benchmarks/streaming.py [--sections parse server] [--families qwen3 ...] [--sizes 500 4000]
      [--runs 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the test support module below

from benchmarks.parsing import best_seconds, completion_of
from tests.parsing.cases import TOOLS, case_names, get_case

from tito.engines.instant import InstantEngine
from tito.engines.protocol import Finish, FinishKind, GenerateRequest, GenerationChunk, logprob_values, token_ids
from tito.server import ServerOptions, ServerState
from tito.server.turns.completions import PreparedTurn, parse_chat_request, prepare_turn
from tito.server.turns.retries import unmarked_key
from tito.server.turns.streaming import stream_turn
from tito.tokenizer import TitoTokenizer
from tito.trajectory.events import SessionConfig

TARGET_RATIO = 3.0
TARGET_CHUNK_US = 25.0
TARGET_FIRST_MS = 2.0
CHUNK_SIZES = (1, 16)
SERVER_FAMILY = "qwen3"


def chunked(ids: list[int], size: int) -> list[list[int]]:
    return [ids[i : i + size] for i in range(0, len(ids), size)]


def stream_seconds(tito: TitoTokenizer, ids: list[int], prompt_ids: list[int], size: int) -> tuple[float, float]:
    """The summed time of feeding `ids` in chunks of `size` and finishing, and of finish() alone."""
    chunks = chunked(ids, size)
    parser = tito.incremental_parser(prompt_ids, TOOLS)
    start = time.perf_counter()
    for chunk in chunks:
        parser.feed(chunk)
    before_finish = time.perf_counter()
    parser.finish()
    end = time.perf_counter()
    return end - start, end - before_finish


def measure_parse(name: str, size: int, chunk_sizes: Sequence[int]) -> dict[str, float]:
    case = get_case(name)
    ids, prompt_ids = completion_of(case, size)
    row: dict[str, float] = {"tokens": len(ids)}
    row["whole"] = best_seconds(lambda: case.tito.parse_completion(ids, prompt_ids, TOOLS))
    for chunk in chunk_sizes:
        runs = [stream_seconds(case.tito, ids, prompt_ids, chunk) for _ in range(5)]
        total, finish = min(runs)
        row[f"stream{chunk}"] = total
        row[f"finish{chunk}"] = finish
        row[f"chunk{chunk}"] = total / -(-len(ids) // chunk)
    return row


def parse_section(args: argparse.Namespace) -> bool:
    print(
        f"{'family':13} {'tokens':>7} {'whole us':>9} {'s@1 us':>9} {'us/chunk@1':>11} {'s@16 us':>9} "
        f"{'us/chunk@16':>12} {'finish us':>10} {'s@16/whole':>11}"
    )
    verdicts: list[str] = []
    for name in args.families:
        worst_ratio = worst_chunk = 0.0
        for size in args.sizes:
            row = measure_parse(name, size, CHUNK_SIZES)
            ratio = row["stream16"] / row["whole"]
            worst_ratio = max(worst_ratio, ratio)
            worst_chunk = max(worst_chunk, row["chunk1"] * 1e6, row["chunk16"] * 1e6)
            print(
                f"{name:13} {row['tokens']:7.0f} {row['whole'] * 1e6:9.1f} {row['stream1'] * 1e6:9.1f} "
                f"{row['chunk1'] * 1e6:11.2f} {row['stream16'] * 1e6:9.1f} {row['chunk16'] * 1e6:12.2f} "
                f"{row['finish16'] * 1e6:10.1f} {ratio:11.2f}",
                flush=True,
            )
        passed = worst_ratio <= TARGET_RATIO and worst_chunk <= TARGET_CHUNK_US
        verdicts.append(
            f"{name:13} worst s@16/whole = {worst_ratio:.2f} (<= {TARGET_RATIO}), worst us/chunk = {worst_chunk:.1f} "
            f"(<= {TARGET_CHUNK_US}): {'PASS' if passed else 'MISS'}"
        )
    print("\n" + "\n".join(verdicts))
    return all(verdict.endswith("PASS") for verdict in verdicts)


class ChunkedEngine(InstantEngine):
    """Streams prepared ids in fixed chunks at once, noting when it hands out the first ids."""

    def __init__(self, ids: list[int], chunk_size: int) -> None:
        super().__init__(ids)
        self.chunks = [
            GenerationChunk(token_ids(chunk), logprob_values([-0.5] * len(chunk))) for chunk in chunked(ids, chunk_size)
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
    prepared = await prepare_turn(state, session, parse_chat_request(body), unmarked_key(body).fingerprint, False)
    assert isinstance(prepared, PreparedTurn)
    return prepared


async def one_turn(state: ServerState, engine: ChunkedEngine) -> tuple[float, float, int]:
    """The turn's seconds, the seconds from the engine's first ids to their event, and the events sent."""
    prepared = await prepared_turn(state)
    events = 0
    first = 0.0
    start = time.perf_counter()
    async for event in stream_turn(state, prepared, never_disconnects, time.monotonic()):
        events += 1
        if events == 2:  # the first event after the role chunk: the first decided delta (an upper bound)
            first = time.perf_counter() - engine.first_ids_at
        assert not event.startswith(b"event: error"), event
    return time.perf_counter() - start, first, events


def measure_server(size: int, chunk_size: int, runs: int) -> dict[str, float]:
    case = get_case(SERVER_FAMILY)
    ids, _ = completion_of(case, size)
    engine = ChunkedEngine(ids, chunk_size)
    state = ServerState(case.tokenizer, engine, ServerOptions(family=SERVER_FAMILY))
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


def server_section(args: argparse.Namespace) -> bool:
    print(f"\n{SERVER_FAMILY} through stream_turn")
    print(f"{'tokens':>7} {'chunk':>5} {'whole us':>9} {'turn us':>9} {'events':>6} {'us/chunk':>9} {'first ms':>9}")
    worst_chunk = worst_first = 0.0
    for size in args.sizes:
        for chunk_size in CHUNK_SIZES:
            row = measure_server(size, chunk_size, args.runs)
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
    return passed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sections", nargs="+", choices=("parse", "server"), default=["parse", "server"])
    parser.add_argument("--families", nargs="+", default=case_names(), help="families of the parse section")
    parser.add_argument("--sizes", nargs="+", type=int, default=[500, 4000])
    parser.add_argument("--runs", type=int, default=20, help="streamed turns per row of the server section")
    args = parser.parse_args()
    passed = True
    if "parse" in args.sections:
        passed = parse_section(args) and passed
    if "server" in args.sections:
        passed = server_section(args) and passed
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
