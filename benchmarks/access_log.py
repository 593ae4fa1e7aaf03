"""What the access log adds per request: the same turns through the app with `tito.access` at INFO (one JSON line
per request, written to a file as `tito serve` writes it to stderr) and off, rounds interleaved, side by side in
one process (in-process ASGI calls as in server_overhead.py: what is timed is the server's work).

Prints the median per-turn time (wall and this thread's CPU) with the log on and off, the difference in
microseconds and the ratio; then the middleware alone around a two-message app (on, off), which is the cost without
the turn's noise. Absolute figures are noisy on a shared machine; the side-by-side ratio is what counts.

Run: PYTHONPATH=src python benchmarks/access_log.py [--sessions 20] [--turns 10] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from server_overhead import AsgiClient, build, run_session  # AsgiClient: tests/server/asgi_client.py
from tito.server import create_app
from tito.server.access_log import AccessLogMiddleware
from tito.trajectory.events import TrajectoryKind


async def one_round(sessions: int, turns: int) -> list[tuple[float, float]]:
    state, _ = build("qwen3", TrajectoryKind.LINEAR)
    client = AsgiClient(create_app(state))
    latencies: list[tuple[float, float]] = []
    for index in range(sessions):
        await run_session(client, index, turns, 0, latencies)
    return latencies


async def middleware_alone(requests: int) -> float:
    """Microseconds per request through `AccessLogMiddleware` around an app that only replies."""

    async def reply(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    async def ignore(message: Any) -> None:
        return None

    async def nothing() -> Any:
        return {}

    middleware = AccessLogMiddleware(reply)
    scope = {"type": "http", "method": "POST", "path": "/sessions/0123456789abcdef/v1/chat/completions"}
    started = time.perf_counter()
    for _ in range(requests):
        await middleware(scope, nothing, ignore)
    return (time.perf_counter() - started) / requests * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    access = logging.getLogger("tito.access")
    access.propagate = False
    handler = logging.FileHandler(os.devnull)
    handler.setFormatter(logging.Formatter("tito serve: %(name)s: %(message)s"))
    access.addHandler(handler)
    results: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    asyncio.run(one_round(2, 2))  # warm up imports and caches
    for round_index in range(args.rounds):
        for logged in (True, False) if round_index % 2 == 0 else (False, True):
            access.setLevel(logging.INFO if logged else logging.WARNING)
            results[logged].extend(asyncio.run(one_round(args.sessions, args.turns)))
    on_wall, on_cpu = (statistics.median(t[i] for t in results[True]) * 1e6 for i in (0, 1))
    off_wall, off_cpu = (statistics.median(t[i] for t in results[False]) * 1e6 for i in (0, 1))
    print(f"turns per setting: {len(results[True])} ({args.rounds} interleaved rounds)")
    print(f"median per turn, log off: wall {off_wall:8.1f} us, cpu {off_cpu:8.1f} us")
    print(f"median per turn, log on:  wall {on_wall:8.1f} us, cpu {on_cpu:8.1f} us")
    print(f"added by the access log:  wall {on_wall - off_wall:+8.1f} us ({on_wall / off_wall:.3f}x), "
          f"cpu {on_cpu - off_cpu:+8.1f} us ({on_cpu / off_cpu:.3f}x)")  # fmt: skip
    alone = {}
    for logged in (False, True, False, True):
        access.setLevel(logging.INFO if logged else logging.WARNING)
        alone[logged] = min(alone.get(logged, float("inf")), asyncio.run(middleware_alone(20000)))
    print(f"the middleware alone: off {alone[False]:.1f} us, on {alone[True]:.1f} us per request")


if __name__ == "__main__":
    main()
