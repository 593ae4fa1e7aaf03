"""Bytes per stored token of tito's sessions, old code and new side by side in one run (issue 34).

Each source tree (`--old REV`, extracted from git, and this checkout's src/) runs in its own Python process: the
app is driven in-process (httpx's ASGI transport, the `instant` engine) through a synthetic coding-agent episode
per session: a ~2.5k-token system prompt, 25 tools with JSON schemas (~3k tokens) sent on every request, the whole
history resent each turn, tool-output-like user messages from a few lines to a few thousand tokens (about 800 on
average: the issue's agents append ~1,000 a turn), until the path holds `--tokens` ids. Then, after a garbage
collection, tracemalloc's count of what the sessions still hold (everything allocated under tito's frames since
the warm-up that is still alive: ids, logprobs, messages, tools, metadata, indexes; not the client's; the loop first
runs its pending callbacks, as a server's loop does between requests, so the turns' cancelled watch tasks end) plus
the bytes the sessions' body readers keep that the client allocated (a body handed over in one piece is kept without
a copy; under uvicorn a larger one is joined in tito's frames) and the native xxh3 states their marks hold (allocated
outside Python's allocator: `native_digest_bytes`) is divided by the stored tokens (each node's own
prompt ids and sampled ids). The deep size of the trajectories' id and logprob arrays is given beside it (the id
storage alone: 4 bytes an id once, 8 when a second copy is kept).

The table splits the total into the messages' text (their strings, one byte a character: what the agent sent and
a sample carries, stored once) and the rest, tito's own storage (ids, logprobs, tools, metadata, the turn records
and indexes): the issue's floor of 4-8 bytes (an int32 id, a float32 logprob per sampled token) counts the latter.
Goal (issue 34): <= 10 bytes per stored token of tito's own storage.

Sessions speak each of `--dialects`: chat; Anthropic's messages in Claude Code's shape (the system prompt apart,
`input_schema` tools); Responses in Codex's (`instructions`, flat function tools, output items resent as input, a
`client_metadata` after them that changes every turn).

Run: PYTHONPATH=src python benchmarks/memory.py [--old REV] [--tokens 8192 32768] [--sessions 4]
[--dialects chat anthropic responses]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import os
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import timeit
import tracemalloc
from array import array
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
OLD_DEFAULT = "b544bf7"
"""main before issue 34's memory work: a linear session kept a second copy of its head path's ids, and every turn
kept its own copy of the request's tools and metadata."""
GOAL_BYTES_PER_TOKEN = 10.0
FAMILY = "qwen3"
WORDS = (
    "def",
    "return",
    "self",
    "value",
    "result",
    "import",
    "from",
    "class",
    "for",
    "in",
    "if",
    "else",
    "None",
    "True",
    "False",
    "path",
    "file",
    "line",
    "error",
    "test",
    "config",
    "request",
    "session",
    "token",
    "stream",
    "engine",
    "reply",
    "message",
    "tool",
    "call",
    "args",
    "json",
    "data",
    "index",
    "count",
    "list",
    "dict",
)


def text(rng: random.Random, words: int) -> str:
    """Code-like ASCII text of about `words` words, in lines."""
    lines = []
    while words > 0:
        width = rng.randint(4, 12)
        lines.append("    " * rng.randint(0, 3) + " ".join(rng.choice(WORDS) for _ in range(width)))
        words -= width
    return "\n".join(lines)


def agent_tools(rng: random.Random) -> list[dict[str, Any]]:
    """25 tools with schemas, as the coding agents send (each about 600 bytes of JSON, 3k tokens in all)."""
    tools = []
    for index in range(25):
        properties = {
            f"param_{k}": {"type": rng.choice(["string", "integer", "boolean"]), "description": text(rng, 5)}
            for k in range(4)
        }
        function = {"name": f"tool_{index}", "description": text(rng, 20), "parameters": {
            "type": "object", "properties": properties, "required": ["param_0"]}}  # fmt: skip
        tools.append({"type": "function", "function": function})
    return tools


async def episode(client: Any, rng: random.Random, tools: list[dict[str, Any]], tokens: int, dialect: str) -> None:
    """One session in `dialect` (chat, anthropic or responses): turns until its stored path holds `tokens` ids."""
    session_id = (await client.post("/sessions", json={})).json()["session_id"]
    system = text(rng, 1000)
    conversation: list[dict[str, Any]] = [{"role": "system", "content": system}] if dialect == "chat" else []
    held = 0
    while held < tokens:
        size = rng.choice([10, 30, 80, 150, 300, 600, 1500])  # words (~2 tokens each): a few lines to 3k tokens
        conversation.append({"role": "user", "content": text(rng, min(size, max(5, (tokens - held) // 4)))})
        route, body = DIALECTS[dialect](system, conversation, tools)
        reply = await client.post(f"/sessions/{session_id}{route}", content=orjson.dumps(body))
        if reply.status_code != 200:
            raise RuntimeError(reply.text)
        data = reply.json()
        if dialect == "chat":
            conversation.append(data["choices"][0]["message"])
            held = data["usage"]["total_tokens"]
        else:
            if dialect == "anthropic":
                conversation.append({"role": "assistant", "content": data["content"]})
            else:
                conversation.extend(data["output"])
            held = data["usage"]["input_tokens"] + data["usage"]["output_tokens"]


def chat_body(system: str, conversation: list[dict[str, Any]], tools: list[dict[str, Any]]) -> tuple[str, Any]:
    return "/v1/chat/completions", {"messages": conversation, "tools": tools}


def anthropic_body(system: str, conversation: list[dict[str, Any]], tools: list[dict[str, Any]]) -> tuple[str, Any]:
    """Claude Code's shape: the system prompt apart, tools with an `input_schema`."""
    anthropic_tools = [{"name": tool["function"]["name"], "description": tool["function"]["description"],
                        "input_schema": tool["function"]["parameters"]} for tool in tools]  # fmt: skip
    body = {"model": "m", "max_tokens": 512, "system": system, "messages": conversation, "tools": anthropic_tools}
    return "/v1/messages", body


def responses_body(system: str, conversation: list[dict[str, Any]], tools: list[dict[str, Any]]) -> tuple[str, Any]:
    """Codex's shape: the system prompt as `instructions`, flat function tools, the output items resent as input,
    and a `client_metadata` after them that changes every turn."""
    flat = [{"type": "function", **tool["function"]} for tool in tools]
    metadata = {"turn_id": f"turn-{len(conversation)}"}
    return "/v1/responses", {"model": "m", "instructions": system, "input": conversation, "tools": flat,
                             "client_metadata": metadata}  # fmt: skip


DIALECTS = {"chat": chat_body, "anthropic": anthropic_body, "responses": responses_body}


def kept_client_bytes(state: Any) -> int:
    """Bytes the sessions' resent-body readers keep (a previous body, or what they keep of it) that were not allocated
    under tito's frames: the in-process client hands a body over in one piece, which tito keeps without a copy, so
    tracemalloc counts it as the client's; under uvicorn a larger body arrives in pieces, joined in tito's frames."""
    kept = {}
    for session in state.registry:
        for reader in getattr(session, "resent_bodies", {}).values():
            for last in reader._lasts:  # what a reader keeps is private to it; both trees name it `_lasts`
                kept.update((id(value), value) for value in vars(last).values() if isinstance(value, bytes))
    return sum(sys.getsizeof(value) for value in kept.values() if not allocated_by_tito(value))


XXH3_STATE_BYTES = 640
"""An xxhash.xxh3_128 object's native state: `XXH3_state_t` (576 bytes) from xxHash's aligned malloc (64 more), outside
Python's allocator, so tracemalloc sees only the 48-byte Python object."""


def native_digest_bytes(state: Any) -> int:
    """Bytes of the xxh3 states the readers' marks hold (the fingerprint continued from each kept mark), which
    tracemalloc cannot see; a blake2b state (older trees) is Python-allocated and already counted."""
    states = {}
    for session in state.registry:
        for reader in getattr(session, "resent_bodies", {}).values():
            for last in reader._lasts:
                states.update((id(mark.digest), mark.digest) for mark in last.marks)
    return XXH3_STATE_BYTES * sum(type(digest).__module__ == "xxhash" for digest in states.values())


def allocated_by_tito(value: object) -> bool:
    where = tracemalloc.get_object_traceback(value)
    return where is not None and any("/tito/" in frame.filename for frame in where)


def array_bytes(obj: Any, seen: set[int]) -> int:
    """Bytes of the arrays reachable from `obj` (ids, logprobs, any cached copy of them)."""
    if id(obj) in seen or isinstance(obj, type | str | bytes | int | float):
        return 0
    seen.add(id(obj))
    if isinstance(obj, array):
        return sys.getsizeof(obj)
    if isinstance(obj, dict):
        return sum(array_bytes(v, seen) for v in obj.values())
    if isinstance(obj, list | tuple | set | frozenset):
        return sum(array_bytes(item, seen) for item in obj)
    if hasattr(obj, "__dict__"):
        return array_bytes(vars(obj), seen)
    if hasattr(obj, "__slots__"):
        return sum(array_bytes(getattr(obj, name, None), seen) for name in obj.__slots__)
    return 0


async def measure(tokens: int, sessions: int, dialect: str) -> dict[str, float]:
    """This process's tito (whatever src/ is first on the path): bytes per stored token after `sessions` episodes."""
    import httpx

    from tito.engines.instant import InstantEngine
    from tito.server import ServerOptions, ServerState, create_app
    from tito.server.commands.launch import instant_reply_ids
    from tito.tokenizer import get_tito_tokenizer
    from tito.tokenizer_loading import load_tokenizer
    from turn_growth import Unrecorded

    tokenizer = load_tokenizer(FAMILY)
    reply = tuple(instant_reply_ids(get_tito_tokenizer(tokenizer, FAMILY)))
    engine = InstantEngine(lambda request: reply)
    engine.requests = Unrecorded()  # the scripted engine's own record of every prompt, not tito's
    state = ServerState(tokenizer, engine, ServerOptions(family=FAMILY))
    transport = httpx.ASGITransport(app=create_app(state))
    async with httpx.AsyncClient(transport=transport, base_url="http://tito") as client:
        rng = random.Random(34)
        tools = agent_tools(rng)
        await episode(client, rng, tools, 4096, dialect)  # warm up: tokenizer, template, routes, the tokenizing thread
        await client.delete(f"/sessions/{next(iter(state.registry)).session_id}")
        gc.collect()
        tracemalloc.start(64)  # deep tracebacks: what was allocated under tito's frames is the server's
        for _ in range(sessions):
            await episode(client, rng, tools, tokens, dialect)
        for _ in range(2):  # the loop's pending callbacks run (turns' cancelled watch tasks end), as a server's do
            await asyncio.sleep(0)
        gc.collect()
        server_side = tracemalloc.Filter(True, "*/tito/*", all_frames=True)  # not the client's own caches
        snapshot = tracemalloc.take_snapshot().filter_traces([server_side])
        held = sum(trace.size for trace in snapshot.traces)
        pool = tracemalloc.Filter(True, "*/tito/prompt_buffers.py", all_frames=True)
        buffers = sum(trace.size for trace in snapshot.filter_traces([pool]).traces)
        held += kept_client_bytes(state) + native_digest_bytes(state)
        tracemalloc.stop()
    stored = turns = id_bytes = text_bytes = 0
    for session in state.registry:
        nodes = list(session.trajectory.store)
        turns += len(nodes)
        stored += sum(len(node.turn.prompt_ids) + len(node.turn.output_ids) for node in nodes)
        id_bytes += array_bytes(session.trajectory, set())
        texts = {id(m["content"]): m["content"] for n in nodes for m in (*n.turn.request_messages, n.turn.assistant)}
        text_bytes += sum(sys.getsizeof(content) for content in texts.values() if isinstance(content, str))
    return {"tokens": stored, "turns": turns, "held": held - buffers, "arrays": id_bytes, "text": text_bytes,
            "buffers": buffers}  # fmt: skip


def path_join_cost(tokens: int, turns: int) -> tuple[float, float]:
    """Microseconds per turn to get the head path's ids: the old copy of a cached whole-path array against the new
    join of the path's nodes' own arrays (`joined_ids`), best of several rounds."""
    from tito.path_ids import joined_ids
    from tito.trajectory.events import TurnCommitted
    from tito.trajectory.nodes import Node, path_parts

    step = tokens // turns
    nodes = []
    for index in range(turns):
        prompt, output = array("i", range(step - 30)), array("i", range(30))
        event = TurnCommitted(
            "s", index, index - 1 if index else None, index * step, (), None, prompt, output, array("f", bytes(120)),
            {}, "stop", "", "", {}, 0.0,
        )  # fmt: skip
        nodes.append(Node(event, path_length=(index + 1) * step))
    parts = path_parts(nodes)  # what a linear session keeps in step with its head
    cached = joined_ids(parts)
    rounds = [
        (timeit.timeit(lambda: array("i", cached), number=200), timeit.timeit(lambda: joined_ids(parts), number=200))
        for _ in range(5)
    ]
    return min(r[0] for r in rounds) / 200 * 1e6, min(r[1] for r in rounds) / 200 * 1e6


def prompt_json_cost(tokens: int, appended: int = 1000) -> tuple[float, float]:
    """Microseconds to write a `tokens`-id prompt's JSON for the engine: whole (`ids_json`) against extended from the
    session's previous prompt (`PromptJson`, that prompt `appended` ids shorter), median of 50."""
    from tito.engines.id_json import PromptJson, ids_json

    rng = random.Random(tokens)
    ids = array("i", (rng.randrange(151_000) for _ in range(tokens)))
    previous = ids[:-appended]
    prompts = PromptJson()
    whole = timeit.repeat(lambda: ids_json(ids), number=1, repeat=50)
    extended = timeit.repeat(
        lambda: prompts.ids_json(ids, "s"), setup=lambda: prompts.ids_json(previous, "s"), number=1, repeat=50
    )
    return statistics.median(whole) * 1e6, statistics.median(extended) * 1e6


def share_tools_cost() -> float:
    """Microseconds per turn to find a request's 25 tools (a fresh parse) in the shared table, median of 50."""
    from tito.trajectory.shared_values import SharedValues

    tools = tuple(agent_tools(random.Random(1)))
    shared = SharedValues()
    shared.value(tools)
    copies = iter([tuple(orjson.loads(orjson.dumps(tools))) for _ in range(50)])
    return statistics.median(timeit.repeat(lambda: shared.value(next(copies)), number=1, repeat=50)) * 1e6


def extract(rev: str, into: Path) -> Path:
    """`rev`'s src/ tree, from git, under `into`."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], check=True, capture_output=True)
    tar = into / "src.tar"
    tar.write_bytes(archive.stdout)
    with tarfile.open(tar) as opened:
        opened.extractall(into, filter="data")
    return into / "src"


def run_child(src: Path, tokens: int, sessions: int, dialect: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    command = [sys.executable, __file__, "--child", "--tokens", str(tokens), "--sessions", str(sessions),
               "--dialects", dialect]  # fmt: skip
    done = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    result: dict[str, float] = orjson.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", default=OLD_DEFAULT, help="git revision of the code to compare with")
    parser.add_argument("--tokens", type=int, nargs="+", default=[8192, 32768])
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--dialects", nargs="+", choices=sorted(DIALECTS), default=["chat", "anthropic", "responses"])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(orjson.dumps(asyncio.run(measure(args.tokens[0], args.sessions, args.dialects[0]))).decode())
        return 0
    met = True
    with tempfile.TemporaryDirectory() as scratch:
        trees = {f"old ({args.old})": extract(args.old, Path(scratch)), "new": ROOT / "src"}
        print(f"family {FAMILY}; {args.sessions} sessions per size; bytes per stored token: B/token = everything the "
              f"sessions hold (tracemalloc) = text (the messages' strings) + rest (tito's own storage); arrays = the "
              f"id/logprob arrays (part of rest); goal: rest <= {GOAL_BYTES_PER_TOKEN:.0f}; buffers = the server's "
              f"prompt buffers, a bounded cache of the process, not counted (tito.prompt_buffers)")  # fmt: skip
        print(f"{'tokens':>7} {'dialect':>9} {'code':>16} {'turns':>6} {'stored':>8} {'B/token':>8} {'text':>6} "
              f"{'rest':>6} {'arrays':>7} {'buffers KiB':>12}")  # fmt: skip
        for tokens, dialect, (name, src) in itertools.product(args.tokens, args.dialects, trees.items()):
            result = run_child(src, tokens, args.sessions, dialect)
            per_token = result["held"] / result["tokens"]
            text, rest = result["text"] / result["tokens"], per_token - result["text"] / result["tokens"]
            print(f"{tokens:7d} {dialect:>9} {name:>16} {result['turns']:6.0f} {result['tokens']:8.0f} "
                  f"{per_token:8.1f} {text:6.1f} {rest:6.1f} {result['arrays'] / result['tokens']:7.1f} "
                  f"{result['buffers'] / 1024:12.0f}")  # fmt: skip
            met = met and (name != "new" or rest <= GOAL_BYTES_PER_TOKEN)
    print("\nhead path ids per turn, us (old: copy the cached whole-path array; new: join the nodes' arrays)")
    print(f"{'tokens':>7} {'turns':>6} {'old copy':>9} {'new join':>9}")
    for tokens in args.tokens:
        for turns in (10, 40, 300):
            old, new = path_join_cost(tokens, turns)
            print(f"{tokens:7d} {turns:6d} {old:9.1f} {new:9.1f}")
    print("\nengine body's prompt ids as JSON per turn, us (1,000 new ids a turn): whole vs extended (PromptJson)")
    print(f"{'tokens':>7} {'whole':>9} {'extended':>9}")
    for tokens in args.tokens:
        whole, extended = prompt_json_cost(tokens)
        print(f"{tokens:7d} {whole:9.1f} {extended:9.1f}")
    print(f"\n25 tools ({len(orjson.dumps(agent_tools(random.Random(1))))} bytes of JSON) found in the shared table: "
          f"{share_tools_cost():.1f} us per turn")  # fmt: skip
    print("goal met" if met else "GOAL MISSED")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
