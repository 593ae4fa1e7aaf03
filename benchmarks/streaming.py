"""Streaming parse cost per family: the incremental parser fed 1-id and 16-id chunks vs the whole parse.

The parse part of issue #12's streaming benchmark (SSE encoding and time to first chunk belong to the
server). For each family and size, the completion of benchmarks/parsing.py (long reasoning, a short answer,
two parallel tool calls with nested arguments) is parsed:
  whole      TitoTokenizer.parse_completion(ids, prompt_ids, tools)
  stream@k   TitoTokenizer.incremental_parser(prompt_ids, tools): feed(chunk) per k-id chunk, then finish()
Reported: the summed streaming parse, the added time per chunk (summed / chunks), and finish() alone.
Targets (issue #12): summed stream@16 / whole <= 3; per chunk well under 25 us.
Run from the repository root:
  python benchmarks/streaming.py [--families qwen3 ...] [--sizes 500 4000]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the test support module below

from benchmarks.parsing import PARAGRAPH, assistant, best_seconds
from tests.parsing.cases import TOOLS, case_names, get_case, render_completion

from tito.tokenizer import TitoTokenizer

TARGET_RATIO = 3.0
TARGET_CHUNK_US = 25.0
CHUNK_SIZES = (1, 16)


def stream_seconds(tito: TitoTokenizer, ids: list[int], prompt_ids: list[int], size: int) -> tuple[float, float]:
    """The summed time of feeding `ids` in chunks of `size` and finishing, and of finish() alone."""
    chunks = [ids[i : i + size] for i in range(0, len(ids), size)]
    parser = tito.incremental_parser(prompt_ids, TOOLS)
    start = time.perf_counter()
    for chunk in chunks:
        parser.feed(chunk)
    before_finish = time.perf_counter()
    parser.finish()
    end = time.perf_counter()
    return end - start, end - before_finish


def measure(name: str, size: int, chunk_sizes: Sequence[int]) -> dict[str, float]:
    case = get_case(name)
    per_paragraph = len(case.tokenizer.encode(PARAGRAPH, add_special_tokens=False))
    completion = render_completion(case, assistant(case, max(1, size // per_paragraph)))
    ids, prompt_ids = completion.completion_ids, completion.prompt_ids
    row: dict[str, float] = {"tokens": len(ids)}
    row["whole"] = best_seconds(lambda: case.tito.parse_completion(ids, prompt_ids, TOOLS))
    for chunk in chunk_sizes:
        runs = [stream_seconds(case.tito, ids, prompt_ids, chunk) for _ in range(5)]
        total, finish = min(runs)
        row[f"stream{chunk}"] = total
        row[f"finish{chunk}"] = finish
        row[f"chunk{chunk}"] = total / -(-len(ids) // chunk)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--families", nargs="+", default=case_names())
    parser.add_argument("--sizes", nargs="+", type=int, default=[500, 4000])
    args = parser.parse_args()
    print(
        f"{'family':13} {'tokens':>7} {'whole us':>9} {'s@1 us':>9} {'us/chunk@1':>11} {'s@16 us':>9} "
        f"{'us/chunk@16':>12} {'finish us':>10} {'s@16/whole':>11}"
    )
    verdicts: list[str] = []
    for name in args.families:
        worst_ratio = worst_chunk = 0.0
        for size in args.sizes:
            row = measure(name, size, CHUNK_SIZES)
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
    return 0 if all(verdict.endswith("PASS") for verdict in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
