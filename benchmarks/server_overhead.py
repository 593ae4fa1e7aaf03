"""tito's session-server overhead against the `instant` engine, side by side with the same ids sent straight to it.

One run, one process, the app driven in-process through its ASGI interface by a minimal ASGI caller (routing,
body validation, the trajectory, prompt building, parsing, commit and the JSON reply; no socket, no HTTP client
library, so what is timed is the server; uvicorn's C HTTP parser would add a few microseconds per request):
  throughput  64 concurrent sessions x 20 turns through tito, then the exact prompt ids of those turns sent
              straight to the engine with the same concurrency (`direct`): turns/s of each.
  latency     sessions one at a time (no queueing), each turn timed through tito and its ids sent straight to the
              engine: added latency per turn = tito - direct, p50 and p99, in wall time and in this thread's CPU
              time (the CPU figure is immune to other processes on a shared machine; targets are checked on it).
  memory      bytes per stored token of the sessions' trajectories: token storage (ids int32, logprobs float32 on
              sampled ids, linear's head-path cache) and everything (plus messages and per-turn metadata), by a deep
              size walk of each session's trajectory; stored tokens are each node's own ids (a tree's branches
              share their prefix, stored once).
`--trajectory tree` runs the same agents on tree sessions; `--retry-every K` makes each session retry every K-th
turn once (linear: a one-step retry replaces it; tree: a sibling branch, kept).
Targets (issues 11 and 13): >= 500 turns/s; added p50 <= 2 ms, p99 <= 10 ms; token storage <= 16 bytes per token.

  --journal   then the same throughput and latency runs through tito in memory and with `--journal` at each fsync
              policy (a fresh server and journal directory each, rounds interleaved in rotating order, best round
              kept): turns/s, its ratio to memory, and wall latency p50/p99 with what the journal adds. Goal
              (issue 14): `interval` within 10% of memory.

Run: PYTHONPATH=src python benchmarks/server_overhead.py [--sessions 64] [--turns 20] [--trajectory tree]
     [--retry-every 4] [--journal DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import tempfile
import time
from array import array
from pathlib import Path
from typing import Any

import orjson

from tito.engines.instant import InstantEngine
from tito.engines.protocol import GenerateRequest
from tito.journal import FsyncPolicy
from tito.server import ServerOptions, ServerState, create_app
from tito.server.journaling import open_server_journal
from tito.server.launch import instant_reply_ids
from tito.tokenizer import get_tito_tokenizer
from tito.tokenizer_loading import load_tokenizer
from tito.trajectory.events import TrajectoryKind

TARGET_TURNS_PER_S, TARGET_P50_MS, TARGET_P99_MS, TARGET_BYTES_PER_TOKEN = 500.0, 2.0, 10.0, 16.0
SYSTEM = "You are a careful coding agent. Work step by step, call tools when needed, and report briefly. " * 4


def build(family: str, trajectory: TrajectoryKind) -> tuple[ServerState, InstantEngine]:
    tokenizer = load_tokenizer(family)
    reply = tuple(instant_reply_ids(get_tito_tokenizer(tokenizer, family)))
    engine = InstantEngine(lambda request: reply)
    return ServerState(tokenizer, engine, ServerOptions(family=family, trajectory=trajectory)), engine


def user_turn(session: int, turn: int) -> dict[str, Any]:
    return {"role": "user", "content": f"Session {session}, step {turn}: run the next check and tell me the result."}


class AsgiClient:
    """POSTs straight into the ASGI app (no socket, no HTTP client library): what is timed is the server's work."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def post(self, path: str, body: Any = None) -> tuple[int, Any]:
        payload = orjson.dumps(body) if body is not None else b""
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
            "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"",
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())],
            "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80),
        }  # fmt: skip
        sent = False
        status = 0
        chunks: list[bytes] = []

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if sent:
                await asyncio.sleep(3600)
            sent = True
            return {"type": "http.request", "body": payload, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        await self.app(scope, receive, send)
        return status, orjson.loads(b"".join(chunks)) if chunks else None


async def run_session(
    client: AsgiClient, index: int, turns: int, retry_every: int, latencies: list[tuple[float, float]] | None
) -> None:
    session_id = (await client.post("/sessions"))[1]["session_id"]
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    for turn in range(turns):
        messages.append(user_turn(index, turn))
        retried = retry_every > 0 and turn % retry_every == retry_every - 1
        for _ in range(2 if retried else 1):
            wall, cpu = time.perf_counter(), time.thread_time()
            status, reply = await client.post(f"/sessions/{session_id}/v1/chat/completions", {"messages": messages})
            if latencies is not None:
                latencies.append((time.perf_counter() - wall, time.thread_time() - cpu))
            if status != 200:
                raise RuntimeError(reply)
        messages.append(reply["choices"][0]["message"])


async def direct(engine: InstantEngine, requests: list[GenerateRequest], concurrency: int,
                 latencies: list[tuple[float, float]] | None) -> float:  # fmt: skip
    """Send the recorded requests straight to the engine, `concurrency` streams at once; returns seconds."""
    lanes = [requests[i::concurrency] for i in range(concurrency)]

    async def lane(items: list[GenerateRequest]) -> None:
        for request in items:
            wall, cpu = time.perf_counter(), time.thread_time()
            await engine.generate(request)
            if latencies is not None:
                latencies.append((time.perf_counter() - wall, time.thread_time() - cpu))
            await asyncio.sleep(0)  # yield like a network reply would

    started = time.perf_counter()
    await asyncio.gather(*(lane(items) for items in lanes))
    return time.perf_counter() - started


def deep_size(obj: Any, seen: set[int], arrays: list[int]) -> int:
    """Bytes of `obj` and everything it references (once each); appends each array's size to `arrays`."""
    if id(obj) in seen or isinstance(obj, type):
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj)
    if isinstance(obj, array):
        arrays.append(size)
    elif isinstance(obj, dict):
        size += sum(deep_size(k, seen, arrays) + deep_size(v, seen, arrays) for k, v in obj.items())
    elif isinstance(obj, list | tuple | set | frozenset):
        size += sum(deep_size(item, seen, arrays) for item in obj)
    elif hasattr(obj, "__dict__"):
        size += deep_size(vars(obj), seen, arrays)
    return size


def memory(state: ServerState) -> tuple[int, int, int]:
    """(tokens stored, bytes of their token arrays, bytes of everything) over every live session.

    Tokens stored: each node's own ids (its prompt beyond its parent's, and its sampled ids). Token arrays: each
    node's prompt ids, sampled ids and logprobs, and a linear session's head-path cache."""
    tokens = token_bytes = total = 0
    for session in state.registry:
        trajectory = session.trajectory
        tokens += sum(len(node.turn.prompt_ids) + len(node.turn.output_ids) for node in trajectory.store)
        arrays: list[int] = []
        total += deep_size(trajectory, set(), arrays)
        token_bytes += sum(arrays)
    return tokens, token_bytes, total


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


async def main(
    sessions: int, turns: int, latency_sessions: int, family: str, trajectory: TrajectoryKind, retry_every: int
) -> int:
    state, engine = build(family, trajectory)
    client = AsgiClient(create_app(state))
    await run_session(client, -1, 2, 0, None)  # warm up: tokenizer, template, routes
    engine.requests.clear()
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(run_session(client, i, turns, retry_every, None) for i in range(sessions)))
    tito_seconds, tito_cpu = time.perf_counter() - wall, time.process_time() - cpu
    requests = list(engine.requests)
    cpu = time.process_time()
    direct_seconds = await direct(engine, requests, sessions, None)
    direct_cpu = time.process_time() - cpu
    tokens, token_bytes, total_bytes = memory(state)

    tito_latency: list[tuple[float, float]] = []
    engine.requests.clear()
    for index in range(latency_sessions):
        await run_session(client, 1000 + index, turns, retry_every, tito_latency)
    direct_latency: list[tuple[float, float]] = []
    await direct(engine, list(engine.requests), 1, direct_latency)
    added_wall = [t[0] - d[0] for t, d in zip(tito_latency, direct_latency, strict=True)]
    added_cpu = [t[1] - d[1] for t, d in zip(tito_latency, direct_latency, strict=True)]

    count = len(requests)
    rate, direct_rate = count / tito_seconds, count / direct_seconds
    p50, p99 = percentile(added_cpu, 50) * 1e3, percentile(added_cpu, 99) * 1e3
    per_token, per_token_all = token_bytes / tokens, total_bytes / tokens
    retries = f", a retry every {retry_every} turns" if retry_every else ""
    print(f"family {family}, {trajectory.value} sessions{retries}; {sessions} concurrent sessions x {turns} agent "
          f"turns ({count} requests); latency over "
          f"{len(added_cpu)} turns, one session at a time; load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} cores")  # fmt: skip
    print(f"{'':30} {'tito':>9} {'direct':>9} {'ratio':>7}   target")
    print(f"{f'turns/s, {sessions} concurrent (wall)':30} {rate:9.0f} {direct_rate:9.0f} {direct_rate / rate:7.1f}   "
          f">= {TARGET_TURNS_PER_S:.0f}")  # fmt: skip
    print(f"{'turns per CPU second':30} {count / tito_cpu:9.0f} {count / max(direct_cpu, 1e-9):9.0f}")
    for name, index, values in [("wall", 0, added_wall), ("cpu", 1, added_cpu)]:
        for q, target in [(50, TARGET_P50_MS), (99, TARGET_P99_MS)]:
            tito_ms = percentile([t[index] for t in tito_latency], q) * 1e3
            direct_ms = percentile([d[index] for d in direct_latency], q) * 1e3
            added = percentile(values, q) * 1e3
            print(f"{f'latency p{q} ms ({name})':30} {tito_ms:9.3f} {direct_ms:9.3f} {'':7}   added {added:.3f}"
                  f"{f' <= {target}' if name == 'cpu' else ''}")  # fmt: skip
    print(f"memory: {tokens} tokens stored; token arrays {per_token:.1f} B/token (<= {TARGET_BYTES_PER_TOKEN:.0f}); "
          f"whole trajectories with messages and metadata {per_token_all:.1f} B/token")  # fmt: skip
    met = (rate >= TARGET_TURNS_PER_S and p50 <= TARGET_P50_MS and p99 <= TARGET_P99_MS
           and per_token <= TARGET_BYTES_PER_TOKEN)  # fmt: skip
    print("targets met" if met else "TARGETS MISSED")
    return 0 if met else 1


async def journal_round(family: str, directory: Path | None, policy: str, sessions: int, turns: int,
                        latency_sessions: int) -> tuple[float, float, list[float]]:  # fmt: skip
    """turns/s (wall, and per CPU second of this process, its fsync thread included) with `sessions` concurrent,
    and per-turn wall latencies one session at a time, through a fresh server
    (journaled to `directory` with `policy`, or in memory when None)."""
    state, _ = build(family, TrajectoryKind.LINEAR)
    journal = open_server_journal(state.registry, directory, policy) if directory is not None else None
    try:
        client = AsgiClient(create_app(state))
        await run_session(client, -1, 2, 0, None)
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(run_session(client, i, turns, 0, None) for i in range(sessions)))
        rate = sessions * turns / (time.perf_counter() - wall)
        cpu_rate = sessions * turns / (time.process_time() - cpu)
        latencies: list[tuple[float, float]] = []
        for index in range(latency_sessions):
            await run_session(client, 1000 + index, turns, 0, latencies)
        return rate, cpu_rate, [latency[0] for latency in latencies]
    finally:
        if journal is not None:
            journal.close()


async def journal_comparison(family: str, root: Path, sessions: int, turns: int, latency_sessions: int,
                             rounds: int) -> bool:  # fmt: skip
    """Memory against each fsync policy, side by side; True when `interval` is within 10% of memory's turns/s."""
    configs = ["memory", *(policy.value for policy in FsyncPolicy)]
    best: dict[str, tuple[float, float, list[float]]] = {}
    for round_number in range(rounds):
        shift = round_number % len(configs)  # each config takes each place in the order: no position bias
        for config in configs[shift:] + configs[:shift]:
            directory = None if config == "memory" else root / f"{config}-{round_number}"
            measured = await journal_round(family, directory, config, sessions, turns, latency_sessions)
            if config not in best or measured[1] > best[config][1]:
                best[config] = measured
    memory_rate, memory_cpu_rate, memory_latencies = best["memory"]
    memory_p50, memory_p99 = percentile(memory_latencies, 50), percentile(memory_latencies, 99)
    print(
        f"\njournal: {sessions} concurrent sessions x {turns} turns, best of {rounds} interleaved rounds (by turns per "
        f"CPU second); latency over {len(memory_latencies)} turns, one session at a time; journals under {root}"
    )
    print(f"{'':10} {'turns/s':>8} {'vs memory':>10} {'turns/CPU s':>12} {'vs memory':>10} {'p50 ms':>7} "
          f"{'p99 ms':>7} {'added p50':>10} {'added p99':>10}")  # fmt: skip
    for config in configs:
        rate, cpu_rate, latencies = best[config]
        p50, p99 = percentile(latencies, 50), percentile(latencies, 99)
        added = ((p50 - memory_p50) * 1e3, (p99 - memory_p99) * 1e3)
        print(f"{config:10} {rate:8.0f} {rate / memory_rate:10.2f} {cpu_rate:12.0f} {cpu_rate / memory_cpu_rate:10.2f} "
              f"{p50 * 1e3:7.3f} {p99 * 1e3:7.3f} {added[0]:10.3f} {added[1]:10.3f}")  # fmt: skip
    met = best["interval"][1] >= 0.9 * memory_cpu_rate
    print("journal goal met: interval within 10% of memory (turns per CPU second)" if met
          else "JOURNAL GOAL MISSED: interval more than 10% below memory (turns per CPU second)")  # fmt: skip
    return met


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--latency-sessions", type=int, default=10)
    parser.add_argument("--family", default="qwen3")
    parser.add_argument("--trajectory", choices=[kind.value for kind in TrajectoryKind], default="linear")
    parser.add_argument("--retry-every", type=int, default=0, metavar="K", help="retry every K-th turn once")
    parser.add_argument("--journal", type=Path, metavar="DIR",
                        help="also compare memory with --journal at each fsync policy; journals go under DIR "
                        "(put it on the disk a server would use)")  # fmt: skip
    parser.add_argument("--journal-rounds", type=int, default=3)
    args = parser.parse_args()
    kind = TrajectoryKind(args.trajectory)
    code = asyncio.run(main(args.sessions, args.turns, args.latency_sessions, args.family, kind, args.retry_every))
    if args.journal is not None:
        with tempfile.TemporaryDirectory(dir=args.journal) as root:
            journal_met = asyncio.run(
                journal_comparison(args.family, Path(root), args.sessions, args.turns, args.latency_sessions,
                                   args.journal_rounds)
            )  # fmt: skip
        code = code or (0 if journal_met else 1)
    sys.exit(code)
