"""A resent body read from the previous body's prefix, old code and new side by side (issue 34).

Each source tree (`--old REV`, extracted from git, and this checkout's src/) reads in its own Python process the
bodies of one growing conversation, each body from the previous one's prefix (`server.sessions.resent_prefix`, the
reader a session keeps per route), and prints the median microseconds per read. The bodies carry 25 tools with large
JSON schemas (benchmarks/turn_cpu.py's) after the conversation, ~1k-token tool outputs appended each turn, to
`--tokens` tokens of text (~4 characters a token). Shapes:
  chat       chat completions: the system prompt in `messages`, the tools after them, unchanged every turn;
  codex      Responses in Codex's shape: `instructions`, `input`, the tools, `include`, and a `client_metadata`
             after them that changes every turn.

Run: PYTHONPATH=src python benchmarks/resent_read.py [--old REV] [--tokens 8192 32768] [--shapes chat codex]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from server_overhead import tool_output
from turn_cpu import SYSTEM, export_source, tool_schemas

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 20


def bodies(shape: str, tokens: int) -> list[bytes]:
    """The request bodies of one conversation in `shape`, turn by turn, until its text holds ~`tokens` tokens."""
    tools = tool_schemas(25, random.Random(0))
    items: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test."}]
    sent: list[bytes] = []
    turn = chars = 0
    while chars < tokens * 4:
        call_id = f"call_{turn}"
        if shape == "chat":
            call = {"id": call_id, "type": "function", "function": {"name": "run", "arguments": '{"cmd": "pytest"}'}}
            items += [{"role": "assistant", "content": None, "tool_calls": [call]},
                      {"role": "tool", "tool_call_id": call_id, "content": tool_output(0, turn, 4000)}]  # fmt: skip
            chat_tools = [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                                            "parameters": t["schema"]}} for t in tools]  # fmt: skip
            asked: dict[str, Any] = {"model": "m", "messages": [{"role": "system", "content": SYSTEM}, *items],
                                     "tools": chat_tools}  # fmt: skip
        else:
            output = tool_output(0, turn, 4000)
            items += [{"type": "function_call", "call_id": call_id, "name": "run", "arguments": '{"cmd": "pytest"}'},
                      {"type": "function_call_output", "call_id": call_id, "output": output}]  # fmt: skip
            flat = [{"type": "function", "name": t["name"], "description": t["description"], "parameters": t["schema"],
                     "strict": False} for t in tools]  # fmt: skip
            metadata = {"turn_id": f"turn-{turn}"}  # changes every turn, after the input and the tools
            asked = {"model": "m", "instructions": SYSTEM, "input": items, "tools": flat, "store": False,
                     "include": ["reasoning.encrypted_content"], "client_metadata": metadata}  # fmt: skip
        sent.append(orjson.dumps(asked))
        turn, chars = turn + 1, chars + 4000
    return sent


def child(shape: str, tokens: int) -> None:
    """In this process's tito: the median microseconds of a read from the prefix, over ROUNDS fresh readers."""
    from tito.server.dialects import responses
    from tito.server.turns.completions import chat_body_reader

    sent = bodies(shape, tokens)
    seconds = []
    for _ in range(ROUNDS):
        reader = chat_body_reader() if shape == "chat" else responses.body_reader()
        reader.read(sent[0])
        for body in sent[1:]:
            start = time.perf_counter()
            read = reader.read(body)
            seconds.append(time.perf_counter() - start)
            assert read.from_prefix
    print(f"{statistics.median(seconds) * 1e6:.1f} {len(sent)} {len(sent[-1])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", metavar="REV", help="also this commit's src/, side by side")
    parser.add_argument("--tokens", type=int, nargs="+", default=[8192, 32768])
    parser.add_argument("--shapes", nargs="+", choices=["chat", "codex"], default=["chat", "codex"])
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return
    with tempfile.TemporaryDirectory() as scratch:
        sources = [ROOT / "src"]
        if args.old:
            sources.insert(0, export_source(args.old, Path(scratch)))
        names = [args.old or "", "new"][-len(sources) :]
        print(f"median us per read from the previous body's prefix ({ROUNDS} conversations per cell)")
        print(f"{'shape':>6} {'tokens':>7} {'turns':>6} {'last body KB':>13} " + " ".join(f"{n:>10}" for n in names))
        for shape in args.shapes:
            for tokens in args.tokens:
                cells = []
                for source in sources:
                    env = {**os.environ, "PYTHONPATH": f"{source}{os.pathsep}{ROOT / 'benchmarks'}"}
                    command = [sys.executable, __file__, "--child", shape, str(tokens)]
                    done = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
                    cells.append(done.stdout.split())
                turns, size = cells[-1][1], int(cells[-1][2]) // 1024
                micros = [float(cell[0]) for cell in cells]
                ratio = f"  new/old {micros[-1] / micros[0]:.2f}" if len(micros) > 1 else ""
                print(
                    f"{shape:>6} {tokens:>7} {turns:>6} {size:>13} " + " ".join(f"{m:>10.1f}" for m in micros) + ratio
                )


if __name__ == "__main__":
    main()
