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

  --wire ENGINE...  instead, the real wire (issue 22): `tito serve --engine sglang|vllm` in its own process in front
              of benchmarks/wire_engine.py (a fast SGLang/vLLM-wire engine, another process); agents run
              tool-calling turns (~1k-token tool outputs) to --wire-tokens, --wire-sessions at once; then the same
              engine requests (each turn's prompt ids, read back from the sessions' samples) go straight to the
              engine with the same concurrency. Prints turns/s both ways, tito's own cost per turn (the difference
              of ms per request), the server's CPU per turn (/proc), added latency p50/p99 under load and one
              session at a time; then --bursts runs of 256 concurrent POST /sessions on new connections (errors).
              --tito-src runs tito from several source trees (e.g. an older commit's) side by side.
              --wire-stream: every turn streams (`stream: true`, as Claude Code and Codex send), tito's SSE read to
              its end, and the engine requests sent straight stream too.
              Goals: own cost <= 2 ms per turn to 8k tokens, <= 3 ms to 32k (64 sessions); 0 connection errors.
              TITO_PROFILE_DIR=DIR: py-spy records the server over each loaded phase (raw stacks, DIR/<config>.txt).

Run: PYTHONPATH=src python benchmarks/server_overhead.py [--sessions 64] [--turns 20] [--trajectory tree]
     [--retry-every 4] [--journal DIR]
     python benchmarks/server_overhead.py --wire sglang vllm [--wire-sessions 64 256] [--wire-tokens 8192 32768]
     [--latency-sessions 3] [--bursts 10] [--tito-src OLD/src src] [--wire-stream]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the test support module below

from tests.server.asgi_client import AsgiClient

from tito.engines.instant import InstantEngine
from tito.engines.protocol import GenerateRequest
from tito.journal import FsyncPolicy
from tito.server import ServerOptions, ServerState, create_app
from tito.server.commands.launch import instant_reply_ids
from tito.server.sessions.journaling import open_server_journal
from tito.tokenizer import get_tito_tokenizer
from tito.tokenizer_loading import load_tokenizer
from tito.trajectory.events import TrajectoryKind

ROOT = Path(__file__).resolve().parents[1]
TARGET_TURNS_PER_S, TARGET_P50_MS, TARGET_P99_MS, TARGET_BYTES_PER_TOKEN = 500.0, 2.0, 10.0, 16.0
SYSTEM = "You are a careful coding agent. Work step by step, call tools when needed, and report briefly. " * 4


def build(family: str, trajectory: TrajectoryKind) -> tuple[ServerState, InstantEngine]:
    tokenizer = load_tokenizer(family)
    reply = tuple(instant_reply_ids(get_tito_tokenizer(tokenizer, family)))
    engine = InstantEngine(lambda request: reply)
    return ServerState(tokenizer, engine, ServerOptions(family=family, trajectory=trajectory)), engine


def user_turn(session: int, turn: int) -> dict[str, Any]:
    return {"role": "user", "content": f"Session {session}, step {turn}: run the next check and tell me the result."}


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


# --- The real wire: `tito serve` and an HTTP engine, each in its own process -------------------------------------

WIRE_TOOLS = [{"type": "function", "function": {
    "name": "run", "description": "Run a shell command and return its output.",
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
}}]  # fmt: skip
WIRE_REPLY = '<tool_call>\n{"name": "run", "arguments": {"cmd": "pytest -q tests/unit"}}\n</tool_call>'
WORDS = ("def", "class", "return", "import", "self", "value", "error", "test", "passed", "failed", "line", "file",
         "module", "async", "await", "config", "token", "session", "request", "reply", "engine",
         "parse", "commit")  # fmt: skip


class RawConnection:
    """One kept-alive HTTP/1.1 connection with the least client-side work (both sides of a comparison use it)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, body: bytes = b"", headers: str = "") -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        assert self.reader is not None
        self.writer.write(f"{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
                          f"content-length: {len(body)}\r\n{headers}\r\n".encode() + body)  # fmt: skip
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head[:-4].split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        if any(line.lower() == b"transfer-encoding: chunked" for line in lines):
            return status, await self._chunked_body()
        length = next((int(line.split(b":", 1)[1]) for line in lines if line.lower().startswith(b"content-length:")), 0)
        return status, await self.reader.readexactly(length) if length else b""

    async def _chunked_body(self) -> bytes:
        assert self.reader is not None
        parts = []
        while size := int((await self.reader.readuntil(b"\r\n"))[:-2].split(b";", 1)[0], 16):
            parts.append((await self.reader.readexactly(size + 2))[:-2])
        await self.reader.readuntil(b"\r\n")  # the empty trailer
        return b"".join(parts)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(ConnectionError):
                await self.writer.wait_closed()


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def process(command: list[str], port: int, health: str, source: Path, timeout: float = 120.0,
            log: Path | None = None) -> Iterator[subprocess.Popen[bytes]]:  # fmt: skip
    """`command` in its own process, importing tito from `source`, until the block ends (stopped by its pid); ready
    when GET `health` answers 200. Its output goes to `log` when given."""
    env = {**os.environ, "PYTHONPATH": f"{source}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    output = log.open("wb") if log is not None else None
    child = subprocess.Popen(command, cwd=ROOT, env=env, stdout=output, stderr=output)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                    sock.sendall(f"GET {health} HTTP/1.1\r\nhost: x\r\n\r\n".encode())
                    if sock.recv(64).startswith(b"HTTP/1.1 200"):
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or child.poll() is not None:
                raise RuntimeError(f"{command[:4]} did not become ready on port {port}")
            time.sleep(0.1)
        yield child
    finally:
        child.terminate()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        if output is not None:
            output.close()


def profile_start(pid: int, name: str) -> subprocess.Popen[bytes] | None:
    """With TITO_PROFILE_DIR set: py-spy samples the server process until `profile_stop` (raw collapsed stacks)."""
    directory = os.environ.get("TITO_PROFILE_DIR")
    if not directory:
        return None
    command = ["py-spy", "record", "-p", str(pid), "-r", "250", "-f", "raw", "-o", f"{directory}/{name}.txt"]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL)


def profile_stop(profiler: subprocess.Popen[bytes] | None) -> None:
    if profiler is not None:
        profiler.send_signal(signal.SIGINT)
        profiler.wait(30)


@dataclass
class WireAgent:
    """One agent's transcript so far and what its turns measured."""

    index: int
    messages: list[dict[str, Any]]
    stream: bool = False
    """Turns ask `stream: true` (as Claude Code and Codex always do) and read the SSE reply to its end."""
    session_id: str = ""
    latencies: list[float] = field(default_factory=list)
    prompt_tokens: list[int] = field(default_factory=list)


def tool_output(index: int, turn: int, chars: int) -> str:
    rng = random.Random(index * 1000 + turn)
    words = rng.choices(WORDS, k=chars // 6 + 1)
    lines = [" ".join(words[i : i + 12]) for i in range(0, len(words), 12)]
    return f"$ pytest -q  # agent {index}, step {turn}\n" + "\n".join(lines)[:chars]


async def wire_agent(port: int, agent: WireAgent, turns: int, output_chars: int) -> None:
    """Create a session and run `turns` tool-calling turns, each followed by a tool output of `output_chars`."""
    connection = RawConnection(port)
    try:
        status, body = await connection.request("POST", "/sessions")
        if status != 200:
            raise RuntimeError(f"POST /sessions: {status} {body[:200]!r}")
        agent.session_id = orjson.loads(body)["session_id"]
        path = f"/sessions/{agent.session_id}/v1/chat/completions"
        for turn in range(turns):
            asked: dict[str, Any] = {"messages": agent.messages, "tools": WIRE_TOOLS}
            if agent.stream:
                asked |= {"stream": True, "stream_options": {"include_usage": True}}
            payload = orjson.dumps(asked)
            started = time.perf_counter()
            status, body = await connection.request("POST", path, payload)
            agent.latencies.append(time.perf_counter() - started)
            if status != 200:
                raise RuntimeError(f"turn {turn}: {status} {body[:300]!r}")
            reply = streamed_reply(body) if agent.stream else orjson.loads(body)
            agent.prompt_tokens.append(reply["usage"]["prompt_tokens"])
            message = reply["choices"][0]["message"]
            agent.messages.append(message)
            call_id = message["tool_calls"][0]["id"] if message.get("tool_calls") else f"call-{turn}"
            agent.messages.append({"role": "tool", "tool_call_id": call_id,
                                   "content": tool_output(agent.index, turn, output_chars)})  # fmt: skip
    finally:
        await connection.close()


def streamed_reply(body: bytes) -> dict[str, Any]:
    """A streamed chat completion's SSE chunks put together as the whole reply's `choices[0].message` and `usage`."""
    message: dict[str, Any] = {"role": "assistant", "content": ""}
    calls: dict[int, dict[str, Any]] = {}
    usage = None
    for line in body.split(b"\n"):
        if not line.startswith(b"data: {"):
            continue
        chunk = orjson.loads(line[len(b"data: ") :])
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            message["content"] += delta.get("content") or ""
            for call in delta.get("tool_calls") or ():
                into = calls.setdefault(call["index"], {"id": "", "type": "function",
                                                         "function": {"name": "", "arguments": ""}})  # fmt: skip
                into["id"] = call.get("id") or into["id"]
                for key in ("name", "arguments"):
                    into["function"][key] += (call.get("function") or {}).get(key) or ""
    if calls:
        message["tool_calls"] = [calls[index] for index in sorted(calls)]
    return {"choices": [{"message": message}], "usage": usage}


async def direct_bodies(port: int, kind: str, agent: WireAgent, stop_ids: tuple[int, ...]) -> list[tuple[str, bytes]]:
    """The engine requests tito sent for `agent`'s turns: each turn's prompt is a prefix of the session's sample."""
    from tito.engines.protocol import GenerateRequest, SamplingParams
    from tito.engines.sglang import generate_body
    from tito.engines.vllm import completions_body

    connection = RawConnection(port)
    try:
        status, body = await connection.request("POST", f"/sessions/{agent.session_id}/samples")
    finally:
        await connection.close()
    if status != 200:
        raise RuntimeError(f"samples: {status} {body[:200]!r}")
    tokens = orjson.loads(body)["samples"][-1]["tokens"]
    bodies = []
    for turn, length in enumerate(agent.prompt_tokens):
        prompt = tokens[:length]
        request = GenerateRequest(prompt, SamplingParams(4096, stop_token_ids=stop_ids), f"direct-{turn}", "s")
        if kind == "sglang":
            bodies.append(("/generate", orjson.dumps(generate_body(request, stream=agent.stream))))
        else:
            body = completions_body(request, "wire-engine", stream=agent.stream)
            bodies.append(("/v1/completions", orjson.dumps(body)))
    return bodies


async def direct_lane(port: int, bodies: list[tuple[str, bytes]], latencies: list[float]) -> None:
    connection = RawConnection(port)
    try:
        for path, body in bodies:
            started = time.perf_counter()
            status, reply = await connection.request("POST", path, body, "x-smg-routing-key: s\r\n")
            latencies.append(time.perf_counter() - started)
            if status != 200:
                raise RuntimeError(f"direct {path}: {status} {reply[:200]!r}")
    finally:
        await connection.close()


async def burst(port: int, count: int, path: str = "/sessions") -> int:
    """`count` concurrent POSTs, each on a new connection; how many got no HTTP reply (reset, refused, cut)."""

    async def one() -> bool:
        connection = RawConnection(port)
        try:
            status, _ = await connection.request("POST", path)
            return status in (200, 503)
        except (OSError, asyncio.IncompleteReadError):
            return False
        finally:
            await connection.close()

    return sum(not ok for ok in await asyncio.gather(*(one() for _ in range(count))))


@dataclass
class WireFigures:
    kind: str
    stream: bool
    sessions: int
    tokens: int
    turns: int
    tito_rate: float
    direct_rate: float
    tito_cpu_ms: float
    engine_cpu_ms: tuple[float, float]
    added_load: tuple[float, float]
    added_alone: tuple[float, float]
    last_prompt: int


async def wire_run(kind: str, stream: bool, sessions: int, tokens: int, turns: int, latency_sessions: int,
                   family: str, tito_port: int, engine_port: int, tito_pid: int, engine_pid: int,
                   stop_ids: tuple[int, ...], chars_per_token: float) -> WireFigures:  # fmt: skip
    """One configuration: `sessions` concurrent agents through tito, then the same engine requests sent straight
    to the engine with the same concurrency; then `latency_sessions` agents one at a time, each way."""
    output_chars = int(max(tokens - 400, 0) / turns * chars_per_token)
    system = {"role": "system", "content": SYSTEM}

    def agents(first: int, count: int) -> list[WireAgent]:
        return [WireAgent(first + i, [system, {"role": "user", "content": f"Agent {first + i}: make the tests pass."}],
                          stream) for i in range(count)]  # fmt: skip

    await wire_agent(tito_port, agents(10**6, 1)[0], 2, 200)  # warm up
    loaded = agents(0, sessions)
    gc.collect()
    profiler = profile_start(tito_pid, f"{kind}-{sessions}-{tokens}")
    tito_cpu, engine_cpu, wall = cpu_seconds(tito_pid), cpu_seconds(engine_pid), time.perf_counter()
    await asyncio.gather(*(wire_agent(tito_port, agent, turns, output_chars) for agent in loaded))
    tito_seconds = time.perf_counter() - wall
    tito_cpu, engine_tito = cpu_seconds(tito_pid) - tito_cpu, cpu_seconds(engine_pid) - engine_cpu
    profile_stop(profiler)
    bodies = [await direct_bodies(tito_port, kind, agent, stop_ids) for agent in loaded]
    direct_latencies: list[float] = []
    engine_cpu, wall = cpu_seconds(engine_pid), time.perf_counter()
    await asyncio.gather(*(direct_lane(engine_port, lane, direct_latencies) for lane in bodies))
    direct_seconds = time.perf_counter() - wall
    engine_direct = cpu_seconds(engine_pid) - engine_cpu
    count = sessions * turns
    tito_latencies = [latency for agent in loaded for latency in agent.latencies]
    del bodies

    alone_added: list[float] = []
    for agent in agents(2 * 10**6, latency_sessions):
        await wire_agent(tito_port, agent, turns, output_chars)
        lane: list[float] = []
        await direct_lane(engine_port, await direct_bodies(tito_port, kind, agent, stop_ids), lane)
        alone_added += [t - d for t, d in zip(agent.latencies, lane, strict=True)]
    return WireFigures(
        kind, stream, sessions, tokens, turns, count / tito_seconds, count / direct_seconds, tito_cpu / count * 1e3,
        (engine_tito / count * 1e3, engine_direct / count * 1e3),
        ((percentile(tito_latencies, 50) - percentile(direct_latencies, 50)) * 1e3,
         (percentile(tito_latencies, 99) - percentile(direct_latencies, 99)) * 1e3),
        (percentile(alone_added, 50) * 1e3, percentile(alone_added, 99) * 1e3),
        max(loaded[0].prompt_tokens),
    )  # fmt: skip


def wire_reply_ids(family: str) -> tuple[list[int], tuple[int, ...], float]:
    """The engine's scripted reply (a tool call and the stop token), the family's stop ids, and chars per token of
    the benchmark's tool outputs."""
    tokenizer = load_tokenizer(family)
    tito_tokenizer = get_tito_tokenizer(tokenizer, family)
    stops = tito_tokenizer.stop_token_ids
    ids = [int(i) for i in tokenizer.encode(WIRE_REPLY, add_special_tokens=False)] + [stops[0]]
    sample = tool_output(0, 0, 20_000)
    return ids, tuple(stops), len(sample) / len(tokenizer.encode(sample, add_special_tokens=False))


def wire_main(kinds: list[str], sessions_list: list[int], tokens_list: list[int], turns: int | None,
              latency_sessions: int, family: str, bursts: int, sources: list[Path], stream: bool) -> int:  # fmt: skip
    """Each engine wire, each configuration, `tito serve` from each source tree in turn (a fresh process each)."""
    reply_ids, stop_ids, chars_per_token = wire_reply_ids(family)
    results: list[WireFigures] = []
    burst_errors: dict[str, list[int]] = {}
    for kind in kinds:
        engine_port = free_port()
        engine = [sys.executable, str(ROOT / "benchmarks" / "wire_engine.py"), kind, str(engine_port),
                  ",".join(map(str, reply_ids))]  # fmt: skip
        with process(engine, engine_port, "/health", ROOT / "src") as engine_child:
            for sessions in sessions_list:
                for tokens in tokens_list:
                    for source in sources:
                        session_turns = turns or max(tokens // 1024, 1)
                        tito_port = free_port()
                        url = f"http://127.0.0.1:{engine_port}"
                        tito = [sys.executable, "-m", "tito", "serve", "--family", family, "--engine", kind,
                                "--engine-url", url, "--port", str(tito_port)]  # fmt: skip
                        with process(tito, tito_port, "/health", source) as child:
                            if bursts and str(source) not in burst_errors:
                                burst_errors[str(source)] = [asyncio.run(burst(tito_port, 256)) for _ in range(bursts)]
                            figures = asyncio.run(wire_run(
                                kind, stream, sessions, tokens, session_turns, latency_sessions, family, tito_port,
                                engine_port, child.pid, engine_child.pid, stop_ids, chars_per_token))  # fmt: skip
                        results.append(figures)
                        print_wire(figures, source)
    for source, errors in burst_errors.items():
        print(f"bursts of 256 concurrent POST /sessions on new connections, tito from {source}: {bursts} runs, "
              f"connection errors {errors} (goal: all 0)")  # fmt: skip
    met = not any(any(errors) for errors in burst_errors.values()) and all(
        1e3 / f.tito_rate - 1e3 / f.direct_rate <= (2.0 if f.tokens <= 8192 else 3.0)
        for f in results[len(sources) - 1 :: len(sources)] if f.sessions <= 64
    )  # fmt: skip
    print("wire goals met (the last source tree)" if met else "WIRE GOALS MISSED (the last source tree)")
    return 0 if met else 1


def print_wire(f: WireFigures, source: Path) -> None:
    tito_ms, direct_ms = 1e3 / f.tito_rate, 1e3 / f.direct_rate
    print(f"tito from {source}: {f.kind}, {f.sessions} concurrent sessions x {f.turns} tool-calling turns"
          f"{', streamed' if f.stream else ''}, prompts "
          f"growing to {f.last_prompt} tokens; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n"
          f"  turns/s: tito {f.tito_rate:.0f}, direct {f.direct_rate:.0f}; ms per turn: tito {tito_ms:.2f}, direct "
          f"{direct_ms:.2f}, tito's own {tito_ms - direct_ms:.2f} (goal <= {2 if f.tokens <= 8192 else 3})\n"
          f"  CPU ms per turn: tito serve {f.tito_cpu_ms:.2f}; the engine {f.engine_cpu_ms[0]:.2f} through tito, "
          f"{f.engine_cpu_ms[1]:.2f} direct\n"
          f"  added latency ms, p50/p99: under this load {f.added_load[0]:.1f}/{f.added_load[1]:.1f}; one session at "
          f"a time {f.added_alone[0]:.2f}/{f.added_alone[1]:.2f} (goal p99 <= 10)", flush=True)  # fmt: skip


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
    parser.add_argument("--wire", nargs="+", choices=["sglang", "vllm"], metavar="ENGINE",
                        help="instead: tito serve in front of an HTTP engine of this wire (benchmarks/wire_engine.py), "
                        "each in its own process")  # fmt: skip
    parser.add_argument("--wire-sessions", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--wire-tokens", type=int, nargs="+", default=[8192, 32768], help="prompt tokens at the end")
    parser.add_argument("--wire-turns", type=int, help="turns per session [Default: one per 1024 prompt tokens]")
    parser.add_argument("--bursts", type=int, default=10, help="--wire: runs of 256 concurrent POST /sessions")
    parser.add_argument("--wire-stream", action="store_true",
                        help="--wire: every turn streams (stream: true through tito and to the engine)")  # fmt: skip
    parser.add_argument("--tito-src", type=Path, nargs="+", default=[], metavar="SRC",
                        help="--wire: run tito serve from each of these source trees in turn, side by side "
                        "(e.g. an older commit's src/ from git archive, and this checkout's) "
                        "[Default: this checkout's]")  # fmt: skip
    args = parser.parse_args()
    if args.wire:
        sys.exit(wire_main(args.wire, args.wire_sessions, args.wire_tokens, args.wire_turns, args.latency_sessions,
                           args.family, args.bursts, args.tito_src or [ROOT / "src"], args.wire_stream))  # fmt: skip
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
