"""CPU of streamed turns when the engine streams id by id, as real engines do, with and without tito's stream interval.

benchmarks/wire_engine.py writes a streamed reply at once, so tito reads it as one burst; an engine sampling at R ids
a second writes an event every 1/R s, and each event read alone costs tito its own parse, parser feed, encoding and
send to the client. `tito serve --stream-interval-ms` reads the stream at most once per interval (the events that
arrive in between as one burst; the stream's end as soon as it arrives). This runs wire_engine.py writing an event
every --id-ms, and one `tito serve` per interval side by side (fresh servers, their turns in lockstep), --sessions
streamed chat turns at once, each a --ids id reply; it prints per interval the tito CPU ms per turn (all threads,
/proc schedstat) and the wall seconds per turn (a turn's last event is not held back: the interval does not add to
it).

With `--stream-ids`, each interval runs once per `tito serve --engine-stream-ids` value too (the engine then writes
an event per that many ids, as SGLang's per-request `stream_interval` makes it).

Run: PYTHONPATH=src python benchmarks/stream_pacing.py [--id-ms 5] [--ids 200] [--intervals 0 20 50] [--stream-ids 1 8]
     [--sessions 8] [--turns 6]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import statistics
import sys
import time
from pathlib import Path

import orjson

from server_overhead import RawConnection, free_port, process
from tito.tokenizer import get_tito_tokenizer
from tito.tokenizer_loading import load_tokenizer
from turn_cpu import cpu_ns

ROOT = Path(__file__).resolve().parents[1]


def reply_ids(family: str, count: int) -> list[int]:
    """A plain-text reply of `count` ids, the last the family's stop token."""
    tokenizer = load_tokenizer(family)
    stop = get_tito_tokenizer(tokenizer, family).stop_token_ids[0]
    words = [int(i) for i in tokenizer.encode(" word" * count, add_special_tokens=False)]
    return [*words[: count - 1], stop]


async def turns(port: int, pid: int, sessions: int, count: int) -> tuple[list[float], list[float]]:
    """`count` rounds of `sessions` streamed turns at once (each in a new session): CPU ms per turn, wall s per turn."""
    connections = [RawConnection(port) for _ in range(sessions)]
    cpu, wall = [], []
    body = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "Write."}], "stream": True})

    async def one(connection: RawConnection) -> float:
        _, created = await connection.request("POST", "/sessions")
        path = f"/sessions/{orjson.loads(created)['session_id']}/v1/chat/completions"
        started = time.monotonic()
        status, streamed = await connection.request("POST", path, body)
        if status != 200 or b"[DONE]" not in streamed:
            raise RuntimeError(f"turn failed: {status} {streamed[:300]!r}")
        return time.monotonic() - started

    try:
        for _ in range(count):
            before = cpu_ns(pid)[0]
            seconds = await asyncio.gather(*(one(connection) for connection in connections))
            cpu.append((cpu_ns(pid)[0] - before) / 1e6 / sessions)
            wall.append(statistics.median(seconds))
    finally:
        for connection in connections:
            await connection.close()
    return cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", default="qwen3")
    parser.add_argument("--id-ms", type=float, default=5.0, help="ms between the engine's events [Default: 5]")
    parser.add_argument("--ids", type=int, default=200, help="ids per reply")
    parser.add_argument("--intervals", type=float, nargs="+", default=[0.0, 20.0, 50.0], help="ms")
    parser.add_argument("--stream-ids", type=int, nargs="+", default=[1],
                        help="tito serve --engine-stream-ids: ids per event asked of the engine")  # fmt: skip
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--turns", type=int, default=6)
    args = parser.parse_args()
    ids = reply_ids(args.family, args.ids)
    engine_port = free_port()
    engine = [sys.executable, str(ROOT / "benchmarks" / "wire_engine.py"), "sglang", str(engine_port),
              ",".join(map(str, ids)), str(args.id_ms)]  # fmt: skip
    print(f"wire engine: an event every {args.id_ms:g} ms, {len(ids)} ids a reply; {args.sessions} streamed chat "
          f"turns at once per server, {args.turns} rounds (the first not counted)")  # fmt: skip
    with process(engine, engine_port, "/health", ROOT / "src"), contextlib.ExitStack() as stack:
        servers = []
        configs = list(itertools.product(args.intervals, args.stream_ids))
        for interval, stream_ids in configs:
            port = free_port()
            command = [sys.executable, "-m", "tito", "serve", "--family", args.family, "--engine", "sglang",
                       "--engine-url", f"http://127.0.0.1:{engine_port}", "--port", str(port),
                       "--stream-interval-ms", f"{interval:g}", "--engine-stream-ids", str(stream_ids),
                       "--log-level", "warning"]  # fmt: skip
            pid = stack.enter_context(process(command, port, "/health", ROOT / "src")).pid
            servers.append(((interval, stream_ids), port, pid))
        results: dict[tuple[float, int], tuple[list[float], list[float]]] = {config: ([], []) for config in configs}
        for _ in range(args.turns):  # lockstep: a round on each server in turn
            for config, port, pid in servers:
                cpu, wall = asyncio.run(turns(port, pid, args.sessions, 1))
                results[config][0].extend(cpu)
                results[config][1].extend(wall)
    base = statistics.median(results[configs[0]][0][1:])
    for (interval, stream_ids), (cpu, wall) in results.items():
        cpu, wall = cpu[1:], wall[1:]
        print(f"--stream-interval-ms {interval:4g} --engine-stream-ids {stream_ids:3d}: "
              f"{statistics.median(cpu):6.2f} ms CPU per turn ({statistics.median(cpu) / base:.2f}x), "
              f"{statistics.median(wall):.3f} s per turn")  # fmt: skip


if __name__ == "__main__":
    main()
