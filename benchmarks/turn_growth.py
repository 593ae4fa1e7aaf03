"""A turn's CPU at ~32k tokens against ~2k, in a fresh heap and a fragmented one, old and new side by side (issue 34).

tests/server/test_turn_cost.py's workload: two sessions through the app in one process (no socket), one holding
~2k tokens and one ~32k, sent the same small turn in turn; each side is the mean of its fastest third of the
measured turns' thread CPU. Each (source, heap) pair runs in a process of its own, alternating, `--repeats` times.
A "fragmented" heap is first left as a long test run or server may leave it (`fragment_heap`): there a buffer a turn
allocates anew can land on pages the process never touched, and each page faults when first written. Faults per
turn are the thread's minor faults.

    python benchmarks/turn_growth.py --old 00b1df1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HEAPS = ("fresh", "fragmented")


class Unrecorded(list[Any]):
    """An `instant` engine's record of requests, kept empty in old trees and new alike: a record holds every prompt
    (and, since `tito.prompt_buffers`, keeps its buffer from reuse)."""

    def append(self, request: Any) -> None:
        pass


def fragment_heap() -> list[bytes]:
    """Of 200,000 allocations made one after the other, most small, every 50th 40 B to 3 MB (seeded), keep every
    third; then 6 MB in 300 KB blocks made and freed. The recipe that gave test_turn_cost's CI failure (1.32) here."""
    rng = random.Random(0)
    sizes = (40, 200, 1000, 5000, 70_000, 200_000, 3_000_000)
    kept = []
    for index in range(200_000):
        made = bytes(rng.choice(sizes) if index % 50 == 0 else 64)
        if index % 3 == 0:
            kept.append(made)
    blocks = [bytearray(300_000) for _ in range(20)]
    del blocks
    return kept


def measure(turns: int, fragmented: bool) -> dict[str, Any]:
    """The test's loop, after the app is made (and the heap fragmented); CPU and minor faults of each measured turn,
    per history size."""
    import orjson
    from tests.server.asgi_client import AsgiClient
    from tests.server.test_turn_cost import text

    from tito.engines.instant import InstantEngine
    from tito.family_tokenizer import builtin_tokenizer_for
    from tito.server import ServerOptions, ServerState, create_app
    from tito.server.commands.launch import instant_reply_ids
    from tito.tokenizer import get_tito_tokenizer

    tokenizer = builtin_tokenizer_for("qwen3")[0]
    reply = instant_reply_ids(get_tito_tokenizer(tokenizer, "qwen3"))
    engine = InstantEngine(lambda _: reply)
    engine.requests = Unrecorded()
    client = AsgiClient(create_app(ServerState(tokenizer, engine, ServerOptions(family="qwen3"))))
    sizes = (2_000, 32_000)
    kept = fragment_heap() if fragmented else []

    async def run() -> dict[int, list[tuple[float, int]]]:
        histories: dict[int, list[dict[str, Any]]] = {}
        paths: dict[int, str] = {}
        for size in sizes:
            session = (await client.post("/sessions", {}))[1]["session_id"]
            paths[size] = f"/sessions/{session}/v1/chat/completions"
            histories[size] = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": text(size, 0)}]
        spent: dict[int, list[tuple[float, int]]] = {size: [] for size in sizes}
        for turn in range(turns + 2):
            for size, messages in histories.items():
                body = orjson.dumps({"messages": messages})
                faults = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
                started = time.thread_time()
                answer = (await client.post(paths[size], body))[1]
                cpu = time.thread_time() - started
                faults = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - faults
                if turn >= 2:
                    spent[size].append((cpu, faults))
                messages += [answer["choices"][0]["message"], {"role": "user", "content": text(150, turn + 1)}]
        return spent

    spent = asyncio.run(run())
    del kept
    result: dict[str, Any] = {}
    for size in sizes:
        fastest = sorted(cpu for cpu, _ in spent[size])[: len(spent[size]) // 3]
        result[str(size)] = {
            "ms": statistics.mean(fastest) * 1e3,
            "faults": statistics.mean(faults for _, faults in spent[size]),
        }
    return result


def child(source: Path, heap: str, turns: int) -> dict[str, Any]:
    environment = {**os.environ, "PYTHONPATH": f"{source}{os.pathsep}{ROOT}"}
    command = [sys.executable, __file__, "--child", heap, "--turns", str(turns)]
    done = subprocess.run(command, env=environment, cwd=ROOT, check=True, capture_output=True, text=True)
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", help="an older revision measured beside this tree")
    parser.add_argument("--turns", type=int, default=40, help="measured turns per session")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--child", choices=HEAPS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.turns, args.child == "fragmented")))
        return
    from turn_cpu import export_source

    with tempfile.TemporaryDirectory() as scratch:
        sources = {"new": ROOT / "src"}
        if args.old:
            sources = {f"old {args.old}": export_source(args.old, Path(scratch)), **sources}
        print(f"{'source':>14} {'heap':>10}  {'2k ms':>6} {'32k ms':>6} {'32k/2k':>6}  faults/turn 2k 32k", flush=True)
        for _ in range(args.repeats):
            for heap in HEAPS:
                for name, source in sources.items():
                    result = child(source, heap, args.turns)
                    small, large = result["2000"], result["32000"]
                    print(
                        f"{name:>14} {heap:>10}  {small['ms']:6.3f} {large['ms']:6.3f} {large['ms'] / small['ms']:6.3f}"
                        f"  {small['faults']:14.1f} {large['faults']:4.1f}",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
