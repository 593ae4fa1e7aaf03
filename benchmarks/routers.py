"""Routers in front of two engine servers: turns/s and the share of turns that reached the engine already holding
their prefix, for each router policy side by side in one run.

Agents (`--sessions` at once, `--turns` each, a long first message and a short message per turn, as a tool loop
does) talk to tito, tito's SGLang client talks to the router, the router to two engine servers. Each engine server
is a process of this script (`--engine PORT`) speaking SGLang's `/generate`, with a model of what the routers compete
for: a prefix cache of `--cache-tokens` tokens (LRU over whole prompts + replies, a hit is the longest cached entry
the prompt starts with), `--slots` requests at a time, and a turn's time = uncached prompt tokens x `--prefill-us`
+ reply tokens x `--decode-ms`. It samples tito's fixed instant reply. The routers are the real binaries:
vllm-router (`sticky_least_loaded`, `consistent_hash`, `round_robin`) and smg (`consistent_hashing`,
`cache_aware`). Every policy gets fresh engines (empty caches), a fresh router and a fresh tito.

  turns/s     all turns of all sessions over the wall time of the run.
  prefix hit  turns after a session's first whose engine had cached at least half of the prompt
              (`usage.prompt_tokens_details.cached_tokens` of tito's reply, from the engine's `cached_tokens`).
  cached      cached prompt tokens / all prompt tokens.
  sessions    sessions each engine served a turn of (a session that moved counts on both).

Run: PYTHONPATH=src:. python benchmarks/routers.py [--sessions 32] [--turns 6] [--cache-tokens 44000] [--rounds 1]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from tests.engines.fake_engine import FakeServer
from tests.engines.fake_sglang import sglang_app
from tests.engines.servers import free_port

from tito.engines.sglang import SGLangEngine
from tito.server import ServerOptions, ServerState, create_app
from tito.server.commands.launch import instant_reply_ids
from tito.server.commands.running import serve_in_thread
from tito.tokenizer import get_tito_tokenizer
from tito.tokenizer_loading import load_tokenizer

POLICIES = [
    ("vllm-router", "sticky_least_loaded"),
    ("vllm-router", "consistent_hash"),
    ("vllm-router", "round_robin"),
    ("smg", "consistent_hashing"),
    ("smg", "cache_aware"),
]


@dataclass
class CacheModel:
    """An engine's prefix cache and its slots (see the module docstring)."""

    capacity: int
    slots: asyncio.Semaphore
    prefill_s: float
    decode_s: float
    reply: list[int]
    entries: OrderedDict[tuple[int, ...], None] = field(default_factory=OrderedDict)
    held: int = 0
    sessions: set[str] = field(default_factory=set)
    """The routing keys (tito's session ids) this engine served: for the spread only, never for caching."""

    def cached(self, prompt: list[int]) -> int:
        best, best_key = 0, None
        for key in self.entries:
            if len(key) > best and len(key) <= len(prompt) and list(key) == prompt[: len(key)]:
                best, best_key = len(key), key
        if best_key is not None:
            self.entries.move_to_end(best_key)
        return best

    def store(self, ids: list[int]) -> None:
        key = tuple(ids)
        for cached in [k for k in self.entries if len(k) < len(key) and key[: len(k)] == k]:
            del self.entries[cached]  # the longer entry covers it
            self.held -= len(cached)
        self.entries[key] = None
        self.held += len(key)
        while self.held > self.capacity and len(self.entries) > 1:
            evicted, _ = self.entries.popitem(last=False)
            self.held -= len(evicted)


def engine_app(model: CacheModel) -> Starlette:
    async def generate(request: Request) -> Response:
        body = await request.json()
        prompt = list(body["input_ids"])
        headers = request.headers  # vllm-router forwards X-Session-ID, smg its own routing header
        model.sessions.add(headers.get("x-session-id") or headers.get("x-smg-routing-key") or "")
        async with model.slots:
            cached = model.cached(prompt)
            await asyncio.sleep((len(prompt) - cached) * model.prefill_s + len(model.reply) * model.decode_s)
            model.store(prompt + model.reply)
        meta = {
            "id": body["rid"],
            "finish_reason": {"type": "stop", "matched": model.reply[-1]},
            "prompt_tokens": len(prompt),
            "completion_tokens": len(model.reply),
            "cached_tokens": cached,
            "weight_version": "default",
            "output_token_logprobs": [[-0.5, token, None] for token in model.reply],
        }
        return JSONResponse({"text": "", "output_ids": model.reply, "meta_info": meta})

    async def stats(request: Request) -> Response:
        return JSONResponse({"sessions": len(model.sessions)})

    rest = sglang_app(FakeServer(name="sglang"))  # health, model and server info, as smg's detection asks them
    routes = [Route("/generate", generate, methods=["POST"]), Route("/stats", stats), Mount("/", app=rest)]
    return Starlette(routes=routes)


def serve_engine(args: argparse.Namespace) -> None:
    tokenizer = load_tokenizer("qwen3")
    model = CacheModel(
        args.cache_tokens,
        asyncio.Semaphore(args.slots),
        args.prefill_us / 1e6,
        args.decode_ms / 1e3,
        instant_reply_ids(get_tito_tokenizer(tokenizer, "qwen3")),
    )
    uvicorn.run(engine_app(model), host="127.0.0.1", port=args.engine, log_level="critical", lifespan="off")


@contextlib.contextmanager
def process(command: list[str], log: Path, ready_url: str) -> Iterator[None]:
    with log.open("w") as out:
        child = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            if child.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{command[0]} did not start: {log.read_text()[-1500:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(ready_url, timeout=1).status_code == 200:
                    break
            time.sleep(0.2)
        yield
    finally:
        child.kill()
        child.wait(timeout=10)


def router_command(router: str, policy: str, port: int, workers: list[str]) -> list[str]:
    common = ["--host", "127.0.0.1", "--port", str(port), "--worker-urls", *workers, "--disable-retries"]
    common += ["--prometheus-host", "127.0.0.1", "--prometheus-port", str(free_port())]
    if router == "smg":
        return ["smg", "launch", "--policy", policy, "--log-level", "warn", *common]
    return ["vllm-router", "--policy", policy, "--log-level", "warning", *common]


@dataclass
class Outcome:
    turns: int = 0
    later: int = 0
    later_hits: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0


def first_message(rng: random.Random, words: int) -> str:
    vocabulary = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta", "lambda", "zeta"]
    return " ".join(f"{rng.choice(vocabulary)}{rng.randrange(1000)}" for _ in range(words))


async def agent(client: httpx.AsyncClient, index: int, args: argparse.Namespace, outcome: Outcome) -> None:
    rng = random.Random(index)
    session_id = (await client.post("/sessions")).json()["session_id"]
    messages: list[dict[str, Any]] = [{"role": "user", "content": first_message(rng, args.first_words)}]
    for turn in range(args.turns):
        reply = await client.post(f"/sessions/{session_id}/v1/chat/completions", json={"messages": messages})
        reply.raise_for_status()
        body = reply.json()
        usage = body["usage"]
        cached, prompt = usage["prompt_tokens_details"]["cached_tokens"], usage["prompt_tokens"]
        outcome.turns += 1
        outcome.prompt_tokens += prompt
        outcome.cached_tokens += cached
        if turn:
            outcome.later += 1
            outcome.later_hits += cached * 2 >= prompt
        messages.append({"role": "assistant", "content": body["choices"][0]["message"]["content"]})
        messages.append({"role": "user", "content": first_message(rng, args.turn_words)})


def run_policy(router: str, policy: str, args: argparse.Namespace, root: Path) -> tuple[float, Outcome, list[int]]:
    ports = [free_port() for _ in range(2)]
    router_port = free_port()
    with contextlib.ExitStack() as stack:
        for index, port in enumerate(ports):
            command = [sys.executable, __file__, "--engine", str(port), "--cache-tokens", str(args.cache_tokens),
                       "--slots", str(args.slots), "--prefill-us", str(args.prefill_us),
                       "--decode-ms", str(args.decode_ms)]  # fmt: skip
            stack.enter_context(process(command, root / f"engine-{index}.log", f"http://127.0.0.1:{port}/health"))
        workers = [f"http://127.0.0.1:{port}" for port in ports]
        command = router_command(router, policy, router_port, workers)
        router_url = f"http://127.0.0.1:{router_port}"
        stack.enter_context(process(command, root / f"{router}-{policy}.log", f"{router_url}/health"))
        time.sleep(1.0)  # smg registers its workers after /health answers
        tokenizer = load_tokenizer("qwen3")
        engine = SGLangEngine(router_url, model="tiny", timeout=120)
        state = ServerState(tokenizer, engine, ServerOptions(family="qwen3"))
        url = stack.enter_context(serve_in_thread(create_app(state)))
        outcome = Outcome()

        async def load() -> float:
            limits = httpx.Limits(max_connections=args.sessions)
            async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
                started = time.perf_counter()
                await asyncio.gather(*(agent(client, index, args, outcome) for index in range(args.sessions)))
                return time.perf_counter() - started

        seconds = asyncio.run(load())
        spread = [int(httpx.get(f"{worker}/stats").json()["sessions"]) for worker in workers]
        return seconds, outcome, spread


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=32)
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--first-words", type=int, default=600, help="words of a session's first message")
    parser.add_argument("--turn-words", type=int, default=40, help="words appended per turn")
    parser.add_argument("--cache-tokens", type=int, default=44_000, help="each engine's prefix cache")
    parser.add_argument("--slots", type=int, default=4, help="requests an engine runs at once")
    parser.add_argument("--prefill-us", type=float, default=200.0, help="microseconds per uncached prompt token")
    parser.add_argument("--decode-ms", type=float, default=4.0, help="milliseconds per sampled token")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--engine", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.engine:
        serve_engine(args)
        return
    missing = [name for name in ("vllm-router", "smg") if shutil.which(name) is None]
    if missing:
        sys.exit(f"not installed: {', '.join(missing)} (pip install -e '.[test]')")
    print(f"{args.sessions} sessions x {args.turns} turns, 2 engines x {args.slots} slots, cache {args.cache_tokens} "
          f"tokens each, prefill {args.prefill_us:g} us/token, decode {args.decode_ms:g} ms/token")  # fmt: skip
    print(f"{'router':12} {'policy':20} {'turns/s':>8} {'prefix hit':>10} {'cached':>7} {'sessions':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            for router, policy in POLICIES:
                seconds, outcome, spread = run_policy(router, policy, args, Path(tmp))
                hits = outcome.later_hits / max(1, outcome.later)
                cached = outcome.cached_tokens / max(1, outcome.prompt_tokens)
                sessions = "/".join(map(str, spread))
                row = f"{router:12} {policy:20} {outcome.turns / seconds:8.1f} {hits:10.0%} {cached:7.0%} {sessions:>9}"
                print(row, flush=True)


if __name__ == "__main__":
    main()
