"""Journal append cost per fsync policy, side by side with no journal, for realistic turn events.

A turn event: 2,000 prompt ids, 300 sampled ids and their logprobs, a ~1 KB tool result appended, a ~1 KB
assistant reply (reasoning + tool call), sampling metadata: what `TurnCommitted` holds for one agent step.
  memory    no journal: the turn is committed in memory only (an awaited no-op: the latency baseline)
  encode    encode + frame the event, no I/O (the CPU share of every policy)
  never     append: one write() into the page cache
  interval  append, fsync every 50 ms by the background thread
  always    append, returns after an fsync covers the record (group commit)
Two loads: `serial` (one session, each append awaited before the next: added latency per turn, p50 and p99)
and `concurrent` (64 sessions appending at once on one event loop: appends per second).
The journal directory is on the disk under --dir ([Default: the system temp dir]); fsync cost is the disk's.
Run from the repository root:
  PYTHONPATH=src python benchmarks/journal.py [--turns 2000] [--dir /path/on/the/disk/to/measure]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from array import array
from collections.abc import Awaitable, Callable
from pathlib import Path

from tito.journal.codec import encode_event
from tito.journal.framing import frame
from tito.journal.writer import FsyncPolicy, JournalWriter
from tito.trajectory.events import TurnCommitted

CONCURRENT_SESSIONS = 64


def turn_event(session: int, node: int) -> TurnCommitted:
    tool_result = {"role": "tool", "tool_call_id": "call_0", "content": "stdout: " + "test passed; " * 80}
    assistant = {
        "role": "assistant",
        "content": "",
        "reasoning_content": "The junction drops a newline, so I check the template trailer. " * 15,
        "tool_calls": [{"id": "call_1", "type": "function",
                        "function": {"name": "run", "arguments": '{"cmd": "pytest -q tests/x"}'}}],
    }  # fmt: skip
    return TurnCommitted(
        session_id=f"session-{session:04d}",
        node_id=node,
        parent_id=node - 1 if node else None,
        kept_parent_ids=2000 * node,
        request_messages=(tool_result,),
        tools=None,
        prompt_ids=array("i", range(100_000 + node, 102_000 + node)),
        output_ids=array("i", range(50_000, 50_300)),
        output_logprobs=array("f", (-0.01 * i for i in range(300))),
        assistant=assistant,
        finish_reason="tool_calls",
        response_id=f"chatcmpl-{session}-{node}",
        request_fingerprint="f" * 64,
        metadata={"weight_version": 7, "cached_tokens": 1900, "sampling": {"temperature": 1.0, "top_p": 1.0}},
        at=time.time(),
    )


async def serial(append: Callable[[TurnCommitted], Awaitable[None]], events: list[TurnCommitted]) -> list[float]:
    latencies = []
    for event in events:
        start = time.perf_counter()
        await append(event)
        latencies.append(time.perf_counter() - start)
    return latencies


async def concurrent(append: Callable[[TurnCommitted], Awaitable[None]], events: list[TurnCommitted]) -> float:
    """Appends per second with CONCURRENT_SESSIONS sessions, each appending its turns in order."""
    per_session = [events[i::CONCURRENT_SESSIONS] for i in range(CONCURRENT_SESSIONS)]

    async def session(turns: list[TurnCommitted]) -> None:
        for event in turns:
            await append(event)

    start = time.perf_counter()
    await asyncio.gather(*(session(turns) for turns in per_session))
    return len(events) / (time.perf_counter() - start)


async def in_memory(event: TurnCommitted) -> None:
    return None


async def encode_only(event: TurnCommitted) -> None:
    frame(*encode_event(event))


async def measure(mode: str, events: list[TurnCommitted], base: Path) -> tuple[list[float], float]:
    if mode in ("memory", "encode"):
        append = in_memory if mode == "memory" else encode_only
        return await serial(append, events), await concurrent(append, events)
    policy = FsyncPolicy(mode)
    with tempfile.TemporaryDirectory(dir=base) as first, JournalWriter(Path(first), policy) as writer:
        latencies = await serial(writer.append, events)
    with tempfile.TemporaryDirectory(dir=base) as second, JournalWriter(Path(second), policy) as writer:
        rate = await concurrent(writer.append, events)
    return latencies, rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=2000, help="turn events per mode and load [Default: 2000]")
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()), help="where journals are written")
    args = parser.parse_args()
    events = [turn_event(i % CONCURRENT_SESSIONS, i // CONCURRENT_SESSIONS) for i in range(args.turns)]
    record_bytes = len(frame(*encode_event(events[0])))
    print(f"{args.turns} turn events of {record_bytes} bytes each; journals under {args.dir}")
    header = ("mode", "p50 us", "p99 us", "added p50 us", "appends/s", "MB/s")
    print("{:9} {:>9} {:>9} {:>13} {:>11} {:>7}".format(*header))
    memory_p50 = 0.0
    for mode in ("memory", "encode", "never", "interval", "always"):
        latencies, rate = asyncio.run(measure(mode, events, args.dir))
        p50 = statistics.median(latencies) * 1e6
        p99 = statistics.quantiles(latencies, n=100)[98] * 1e6
        if mode == "memory":
            memory_p50 = p50
            print(f"{mode:9} {p50:9.1f} {p99:9.1f} {0.0:13.1f} {'-':>11} {'-':>7}")
            continue
        print(f"{mode:9} {p50:9.1f} {p99:9.1f} {p50 - memory_p50:13.1f} {rate:11.0f} {rate * record_bytes / 1e6:7.1f}")


if __name__ == "__main__":
    main()
