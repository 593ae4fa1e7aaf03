"""CPU time per turn of the `tito serve` process, per dialect, whole and streamed, old and new code side by side.

`tito serve --engine sglang` runs in its own process in front of benchmarks/wire_engine.py (another process); one
session at a time drives turns through it on a kept-alive connection, so the server's CPU between a turn's request
and its reply is that turn's: the sum of every thread's run time from /proc/<pid>/task/*/schedstat (nanoseconds,
not the 10 ms ticks of /proc/<pid>/stat), read before and after each turn. What is reported is the median over the
measured turns (robust to a shared machine), with the access log's `tito_ms` of the same turns beside it.

  sized       chat, Anthropic Messages and Responses, whole and streamed, at --tokens (8k and 32k): the history grows
              with tool outputs; --measured turns (each appending a ~1k-token one) have prompts centred on the size,
              the first prompt and each turn's reply and template text counted (where the first prompt leaves no
              room, their median is above it: the printed size is the median's). A whole and
              a streamed session of each tree run in lockstep, so the streamed/whole ratio is measured side by side.
              --sessions N: N sessions per server send each turn at once (load, as issue 34 first measured it: 64),
              and the server's CPU over them is divided by N; the default, one, is a lone turn's cost.
  --agent     the coding agents' shape: streamed, 25 tools with large JSON schemas, a ~20k-token system prompt, tool
              outputs from a few lines to thousands, up to --agent-tokens (100k+); medians per history band.
  pace        each configuration prints the CPU ms of a fixed pure-Python loop run just before and after it: the
              machine's speed then, to read absolute figures by (the figures of RESULTS.md say their pace).
  --tito-src  run tito from several source trees side by side (`--old REV` adds an older commit's src/, exported
              with git archive): one fresh server per tree for each configuration, all running at once and driven
              turn by turn in lockstep, so a change of the machine's load falls on each alike. The time waiting for a
              CPU (schedstat's second field) is printed too: on a busy machine it, not tito's work, fills `tito_ms`.

Run: PYTHONPATH=src python benchmarks/turn_cpu.py [--old REV] [--tito-src SRC...] [--tokens 8192 32768] [--measured 15]
     [--dialects chat anthropic responses] [--sessions 64] [--agent] [--agent-tokens 110000]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from server_overhead import WORDS, RawConnection, free_port, process, tool_output, wire_reply_ids

ROOT = Path(__file__).resolve().parents[1]
SYSTEM = "You are a careful coding agent. Work step by step, call tools when needed, and report briefly. "


def cpu_ns(pid: int) -> tuple[int, int]:
    """Of every thread of process `pid` so far, in ns: time run on a CPU, and time spent ready but waiting for one
    (/proc/<pid>/task/*/schedstat's first two fields)."""
    run = waited = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(FileNotFoundError):  # a thread that ended between the listing and the read
            fields = Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()
            run, waited = run + int(fields[0]), waited + int(fields[1])
    return run, waited


def pace_ms() -> float:
    """CPU ms of a fixed pure-Python loop (3M additions) in this process: the machine's speed at that moment, to read
    absolute figures by. This machine's speed drifts up to 2x minute to minute; side-by-side ratios do not depend on
    it, absolute figures do."""
    start, total = time.process_time(), 0
    for number in range(3_000_000):
        total += number
    return (time.process_time() - start) * 1000


def tool_schemas(count: int, rng: random.Random) -> list[dict[str, Any]]:
    """`count` tools with large JSON schemas (nested properties, enums, long descriptions), the first `run`."""
    tools = []
    for index in range(count):
        name = "run" if index == 0 else f"tool_{index}_{rng.choice(WORDS)}"
        properties = {
            f"{rng.choice(WORDS)}_{p}": {
                "type": rng.choice(["string", "integer", "boolean"]),
                "description": " ".join(rng.choices(WORDS, k=25)),
            }
            for p in range(8)
        }
        properties["cmd"] = {"type": "string", "description": "The command line to run."}
        properties["options"] = {
            "type": "object",
            "properties": {"mode": {"type": "string", "enum": ["fast", "full", "dry"]}, "depth": {"type": "integer"}},
        }
        description = " ".join(rng.choices(WORDS, k=120))
        tools.append({"name": name, "description": description, "schema": {"type": "object", "properties": properties}})
    return tools


class Dialect:
    """One dialect's request bodies and how its replies become the next turn's history."""

    name = ""
    path = ""

    def __init__(self, system: str, user: str, tools: list[dict[str, Any]]) -> None:
        self.system, self.tools = system, tools
        self.items: list[dict[str, Any]] = [{"role": "user", "content": user}]

    def body(self, stream: bool) -> bytes:
        raise NotImplementedError

    def take_reply(self, body: bytes, stream: bool) -> tuple[str, int]:
        """Append the reply to the history; its tool call's id and the prompt's token count."""
        raise NotImplementedError

    def add_output(self, call_id: str, text: str) -> None:
        raise NotImplementedError


class Chat(Dialect):
    name, path = "chat", "/v1/chat/completions"

    def body(self, stream: bool) -> bytes:
        tools = [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                                   "parameters": t["schema"]}} for t in self.tools]  # fmt: skip
        asked: dict[str, Any] = {"model": "m", "messages": [{"role": "system", "content": self.system}, *self.items],
                                 "tools": tools}  # fmt: skip
        if stream:
            asked |= {"stream": True, "stream_options": {"include_usage": True}}
        return orjson.dumps(asked)

    def take_reply(self, body: bytes, stream: bool) -> tuple[str, int]:
        from server_overhead import streamed_reply

        reply = streamed_reply(body) if stream else orjson.loads(body)
        message = reply["choices"][0]["message"]
        self.items.append(message)
        return message["tool_calls"][0]["id"], reply["usage"]["prompt_tokens"]

    def add_output(self, call_id: str, text: str) -> None:
        self.items.append({"role": "tool", "tool_call_id": call_id, "content": text})


def sse_events(body: bytes) -> Iterator[dict[str, Any]]:
    for line in body.split(b"\n"):
        if line.startswith(b"data: {"):
            yield orjson.loads(line[len(b"data: ") :])


class Anthropic(Dialect):
    name, path = "anthropic", "/v1/messages"

    def body(self, stream: bool) -> bytes:
        tools = [{"name": t["name"], "description": t["description"], "input_schema": t["schema"]} for t in self.tools]
        asked = {"model": "m", "max_tokens": 4096, "system": self.system, "messages": self.items, "tools": tools,
                 "stream": stream}  # fmt: skip
        return orjson.dumps(asked)

    def take_reply(self, body: bytes, stream: bool) -> tuple[str, int]:
        if not stream:
            reply = orjson.loads(body)
            content, prompt = reply["content"], reply["usage"]["input_tokens"]
        else:
            content, partial, prompt = [], {}, 0
            for event in sse_events(body):
                kind = event["type"]
                if kind == "message_start":
                    prompt = event["message"]["usage"]["input_tokens"]
                elif kind == "content_block_start":
                    content.append(dict(event["content_block"]))
                    partial[event["index"]] = ""
                elif kind == "content_block_delta":
                    delta, block = event["delta"], content[event["index"]]
                    if delta["type"] == "text_delta":
                        block["text"] += delta["text"]
                    elif delta["type"] == "input_json_delta":
                        partial[event["index"]] += delta["partial_json"]
                elif kind == "content_block_stop" and content[event["index"]]["type"] == "tool_use":
                    content[event["index"]]["input"] = orjson.loads(partial[event["index"]] or b"{}")
        self.items.append({"role": "assistant", "content": content})
        return next(block["id"] for block in content if block["type"] == "tool_use"), prompt

    def add_output(self, call_id: str, text: str) -> None:
        result = {"type": "tool_result", "tool_use_id": call_id, "content": text}
        self.items.append({"role": "user", "content": [result]})


class Responses(Dialect):
    name, path = "responses", "/v1/responses"

    def body(self, stream: bool) -> bytes:
        tools = [{"type": "function", "name": t["name"], "description": t["description"], "parameters": t["schema"],
                  "strict": False} for t in self.tools]  # fmt: skip
        asked = {"model": "m", "instructions": self.system, "input": self.items, "tools": tools, "stream": stream,
                 "store": False, "include": ["reasoning.encrypted_content"],
                 "client_metadata": {"turn_id": f"turn-{len(self.items)}"}}  # fmt: skip
        return orjson.dumps(asked)  # Codex's client_metadata, after the input, changes every turn

    def take_reply(self, body: bytes, stream: bool) -> tuple[str, int]:
        if stream:
            reply = next(e["response"] for e in sse_events(body) if e["type"] == "response.completed")
        else:
            reply = orjson.loads(body)
        self.items.extend(reply["output"])
        call = next(item for item in reply["output"] if item["type"] == "function_call")
        return call["call_id"], reply["usage"]["input_tokens"]

    def add_output(self, call_id: str, text: str) -> None:
        self.items.append({"type": "function_call_output", "call_id": call_id, "output": text})


DIALECTS: dict[str, type[Dialect]] = {"chat": Chat, "anthropic": Anthropic, "responses": Responses}


@dataclass
class Turns:
    """What the measured turns of one configuration cost: tito's CPU (ms) and prompt tokens, per turn."""

    cpu_ms: list[float] = field(default_factory=list)
    runqueue_ms: list[float] = field(default_factory=list)
    """Time tito's threads were ready to run but waited for a CPU (another process had it)."""
    prompt_tokens: list[int] = field(default_factory=list)


async def drive(servers: list[tuple[int, int]], dialects: list[list[Dialect]], streams: list[bool],
                plan: Plan) -> list[Turns]:  # fmt: skip
    """Sessions on each server (port, pid), one per entry of `dialects[server]`, streamed or whole as `streams`
    says, driven in lockstep (each turn on every server in turn, so a change of the machine's load falls on all
    alike): turns until `plan` ends them, each followed by the tool output it sizes; the turns it says are measured
    are. A server's sessions send their turns at once, each on its own connection, and
    the server's CPU over them is divided among them: one session is the server's cost of a lone turn (every
    wake-up its own), many are its cost per turn under load (the wake-ups shared, as the issue measured it)."""
    connections = [[RawConnection(port) for _ in lane] for (port, _), lane in zip(servers, dialects, strict=True)]
    measured = [Turns() for _ in servers]
    try:
        paths: list[list[str]] = []
        for lane_connections, lane in zip(connections, dialects, strict=True):
            paths.append([])
            for connection, dialect in zip(lane_connections, lane, strict=True):
                _, body = await connection.request("POST", "/sessions")
                paths[-1].append(f"/sessions/{orjson.loads(body)['session_id']}{dialect.path}")
        lanes = list(zip(servers, connections, paths, dialects, streams, measured, strict=True))
        turn, chars = 0, 0
        while chars is not None:
            measure, calls, prompt = plan.measured(), [], 0
            for (_, pid), lane_connections, lane_paths, lane, stream, turns in lanes:
                payloads = [dialect.body(stream) for dialect in lane]
                sent = zip(lane_connections, lane_paths, payloads, strict=True)
                requests = [connection.request("POST", path, payload) for connection, path, payload in sent]
                before = cpu_ns(pid)
                replies = await asyncio.gather(*requests)
                after = cpu_ns(pid)
                prompts = []
                calls.append([])
                for dialect, (status, body) in zip(lane, replies, strict=True):
                    if status != 200:
                        raise RuntimeError(f"{dialect.name} turn {turn}: {status} {body[:300]!r}")
                    call_id, session_prompt = dialect.take_reply(body, stream)
                    prompts.append(session_prompt)
                    calls[-1].append(call_id)
                prompt = round(statistics.mean(prompts))
                if measure:
                    turns.cpu_ms.append((after[0] - before[0]) / 1e6 / len(lane))
                    turns.runqueue_ms.append((after[1] - before[1]) / 1e6 / len(lane))
                    turns.prompt_tokens.append(prompt)
            chars = plan.output(prompt)  # every lane's prompts are alike: the same conversation in each
            for lane, lane_calls in zip(dialects, calls, strict=True):
                for index, (dialect, call_id) in enumerate(zip(lane, lane_calls, strict=True)):
                    dialect.add_output(call_id, tool_output(index, turn, chars or 0))
            turn += 1
    finally:
        for lane_connections in connections:
            for connection in lane_connections:
                await connection.close()
    return measured


def access_tito_ms(log: Path, count: int) -> list[float]:
    """`tito_ms` of the last `count` turn lines of the access log."""
    values = []
    for line in log.read_bytes().splitlines():
        if b'"tito_ms"' in line and b'"prompt_tokens":null' not in line:
            values.append(float(orjson.loads(line[line.index(b"{") :])["tito_ms"]))
    return values[-count:]


@contextlib.contextmanager
def tito_servers(
    sources: list[Path], engine_port: int, family: str, logs: list[Path]
) -> Iterator[list[tuple[int, int]]]:
    """`tito serve` from each source tree, each its own process: (port, pid) of each."""
    with contextlib.ExitStack() as stack:
        servers = []
        for source, log in zip(sources, logs, strict=True):
            port = free_port()
            command = [sys.executable, "-m", "tito", "serve", "--family", family, "--engine", "sglang",
                       "--engine-url", f"http://127.0.0.1:{engine_port}", "--port", str(port)]  # fmt: skip
            child = stack.enter_context(process(command, port, "/health", source, log=log))
            servers.append((port, child.pid))
        yield servers


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


class Plan:
    """Which turns are measured, and the tool output each turn is followed by."""

    def measured(self) -> bool:
        """Whether the turn about to be sent is measured."""
        raise NotImplementedError

    def output(self, prompt_tokens: int) -> int | None:
        """After a turn whose prompt held `prompt_tokens`: the chars of the tool output to append; None: no more."""
        raise NotImplementedError


class ListedPlan(Plan):
    """A tool output per entry of `outputs` (chars), every turn after the first measured (the agent-shaped run)."""

    def __init__(self, outputs: list[int]) -> None:
        self.outputs, self.turn = outputs, 0

    def measured(self) -> bool:
        return self.turn > 0

    def output(self, prompt_tokens: int) -> int | None:
        self.turn += 1
        return self.outputs[self.turn - 1] if self.turn < len(self.outputs) else None


class SizedPlan(Plan):
    """`measured` turns whose prompts are centred on `tokens`, each appending a ~1k-token tool output: first the
    history grows by outputs of up to 4k tokens, up to `tokens` less the measured turns' half growth (a measured turn
    adds its output, the reply and the template's text around them: what the last turn added beyond its output);
    the first prompt (system prompt, tools) counts too. Where even the first prompt is past that point, the measured
    turns start at once and their median is above `tokens` (the printed size says so)."""

    def __init__(self, tokens: int, measured: int, chars_per_token: float) -> None:
        self.tokens, self.count, self.chars_per_token = tokens, measured, chars_per_token
        self.step = int(1000 * chars_per_token)
        self.growing, self.sent = True, 0
        self.added = 0.0
        """What a turn adds beyond its tool output's tokens (estimated from the last turn)."""
        self.last: tuple[int, int] | None = None
        """The last turn's prompt tokens and the chars of the output appended after it."""

    def measured(self) -> bool:
        return not self.growing and self.sent > 0

    def output(self, prompt_tokens: int) -> int | None:
        if self.last is not None:
            self.added = prompt_tokens - self.last[0] - self.last[1] / self.chars_per_token
        chars = self._next(prompt_tokens)
        self.last = (prompt_tokens, chars) if chars is not None else None
        return chars

    def _next(self, prompt_tokens: int) -> int | None:
        if self.growing:
            per_turn = 1000 + self.added
            before_first = self.tokens - (self.count + 1) / 2 * per_turn  # the turn before the first measured
            wanted = before_first - prompt_tokens - self.added
            if self.last is None:  # what a turn adds is not known yet: half now, the rest once it is
                wanted /= 2
            if wanted > 200:
                return int(min(wanted, 4000) * self.chars_per_token)
            self.growing = False
        self.sent += 1
        return self.step if self.sent <= self.count else None


def agent_outputs(tokens: int, chars_per_token: float, rng: random.Random) -> list[int]:
    """Tool outputs of a coding agent: mostly a few lines, sometimes thousands (log-uniform 100 to 40k chars),
    until the history holds `tokens` (after the ~20k-token system prompt and ~8k of tools)."""
    outputs, total = [], 28_000
    while total < tokens:
        chars = int(10 ** rng.uniform(2, 4.6))
        outputs.append(chars)
        total += int(chars / chars_per_token) + 40
    return outputs


def run_sized(args: argparse.Namespace, sources: list[Path], engine_port: int, chars_per_token: float,
              logs: Path) -> None:  # fmt: skip
    print("median CPU ms per turn (the access log's tito_ms, ms waiting for a CPU) per source tree; whole and streamed "
          "turns of a configuration run in lockstep, so streamed/whole is measured side by side too")  # fmt: skip
    print(f"{'config':26}" + "".join(f"{str(s)[-28:]:>30}" for s in sources) + "   ratio (last/first)")
    tools = tool_schemas(1, random.Random(0))
    for tokens in args.tokens:
        for name in args.dialects:
            streams = [stream for stream in (False, True) for _ in sources]
            trees = sources + sources
            pace_before = pace_ms()
            files = [logs / f"{name}-{stream}-{tokens}-{index}.log" for index, stream in enumerate(streams)]
            with tito_servers(trees, engine_port, args.family, files) as servers:
                dialects = [[DIALECTS[name](SYSTEM * 4, "Make the tests pass.", tools) for _ in range(args.sessions)]
                            for _ in trees]  # fmt: skip
                plan = SizedPlan(tokens, args.measured, chars_per_token)
                measured = asyncio.run(drive(servers, dialects, streams, plan))
            pace_after = pace_ms()
            time.sleep(0.2)
            medians = [median(turns.cpu_ms) for turns in measured]
            for stream in (False, True):
                picked = [index for index, streamed in enumerate(streams) if streamed == stream]
                cells = []
                for index in picked:
                    logged = access_tito_ms(files[index], len(measured[index].cpu_ms) * args.sessions)
                    runqueue = median(measured[index].runqueue_ms)
                    cells.append(f"{medians[index]:6.2f} ms ({median(logged):5.2f}, {runqueue:5.2f})")
                size = median(measured[picked[0]].prompt_tokens) / 1000
                label = f"{name} {'streamed' if stream else 'whole'} ~{size:.1f}k"
                print(f"{label:26}" + "".join(f"{c:>30}" for c in cells)
                      + f"   {medians[picked[-1]] / medians[picked[0]]:.2f}", flush=True)  # fmt: skip
            ratios = "".join(f"{medians[len(sources) + i] / medians[i]:>30.2f}" for i in range(len(sources)))
            print(f"{'  streamed/whole':26}{ratios}   pace loop {pace_before:.0f} -> {pace_after:.0f} ms", flush=True)


def run_agent(args: argparse.Namespace, sources: list[Path], engine_port: int, chars_per_token: float,
              logs: Path) -> None:  # fmt: skip
    rng = random.Random(34)
    tools = tool_schemas(25, rng)
    system = " ".join(rng.choices(WORDS, k=int(20_000 * chars_per_token / 6.5)))
    outputs = agent_outputs(args.agent_tokens, chars_per_token, rng)
    bands = [(0, 40_000), (40_000, 80_000), (80_000, 10**9)]
    print(f"\nagent-shaped: streamed, 25 tools, {len(system)} chars of system prompt, {len(outputs)} turns to "
          f"~{args.agent_tokens} tokens; median CPU ms per turn (and access-log tito_ms) per history band")  # fmt: skip
    for name in args.dialects:
        files = [logs / f"agent-{name}-{index}.log" for index in range(len(sources))]
        with tito_servers(sources, engine_port, args.family, files) as servers:
            user = "Fix the failing test in tests/unit and explain the cause."
            dialects = [[DIALECTS[name](system, user, tools)] for _ in sources]
            measured = asyncio.run(drive(servers, dialects, [True] * len(sources), ListedPlan(outputs)))
        time.sleep(0.2)
        for source, turns, log in zip(sources, measured, files, strict=True):
            logged = access_tito_ms(log, len(turns.cpu_ms))
            cells = []
            for low, high in bands:
                picked = [i for i, p in enumerate(turns.prompt_tokens) if low <= p < high]
                cpu = median([turns.cpu_ms[i] for i in picked])
                tito = median([logged[i] for i in picked]) if len(logged) == len(turns.cpu_ms) else float("nan")
                cells.append(f"{low // 1000}-{min(high, max(turns.prompt_tokens)) // 1000}k: {cpu:6.2f} ({tito:5.2f})")
            print(f"{name:10} {str(source)[-28:]:>28}  " + "   ".join(cells), flush=True)


def export_source(revision: str, into: Path) -> Path:
    """`revision`'s src/ exported with git archive under `into` (the older code of a side-by-side run)."""
    archive = subprocess.run(["git", "archive", revision, "src"], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "src"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", default="qwen3")
    parser.add_argument("--tokens", type=int, nargs="+", default=[8192, 32768])
    parser.add_argument("--measured", type=int, default=15, help="measured turns per configuration")
    parser.add_argument("--sessions", type=int, default=1, help="sized: sessions per server, their turns sent at once")
    parser.add_argument("--dialects", nargs="+", choices=list(DIALECTS), default=list(DIALECTS))
    parser.add_argument("--old", metavar="REV", help="also run this git revision's src/ (first), side by side")
    parser.add_argument("--tito-src", type=Path, nargs="+", default=[], metavar="SRC")
    parser.add_argument("--agent", action="store_true", help="also the agent-shaped workload")
    parser.add_argument("--agent-only", action="store_true", help="only the agent-shaped workload")
    parser.add_argument("--agent-tokens", type=int, default=110_000)
    args = parser.parse_args()
    reply_ids, _, chars_per_token = wire_reply_ids(args.family)
    with tempfile.TemporaryDirectory() as scratch:
        sources = list(args.tito_src) or [ROOT / "src"]
        if args.old:
            sources.insert(0, export_source(args.old, Path(scratch)))
        logs = Path(scratch) / "logs"
        logs.mkdir()
        engine_port = free_port()
        engine = [sys.executable, str(ROOT / "benchmarks" / "wire_engine.py"), "sglang", str(engine_port),
                  ",".join(map(str, reply_ids))]  # fmt: skip
        print(f"tito serve --engine sglang (wire_engine.py), family {args.family}, {args.sessions} session(s) at once "
              f"per server (the agent-shaped workload: one); CPU of the tito process per turn (all threads, /proc "
              f"schedstat), median of the measured turns; load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")  # fmt: skip
        with process(engine, engine_port, "/health", ROOT / "src"):
            if not args.agent_only:
                run_sized(args, sources, engine_port, chars_per_token, logs)
            if args.agent or args.agent_only:
                run_agent(args, sources, engine_port, chars_per_token, logs)


if __name__ == "__main__":
    main()
