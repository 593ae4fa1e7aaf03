"""A turn's CPU does not grow with the history: the same appended turn costs as much at 32k tokens as at 2k.

Two sessions through the app in this process (no socket: what is timed is the server's work), one holding ~2k
tokens and one ~32k; the same small turn is sent to each in turn, and this thread's CPU time per turn is compared
as a ratio in the same run, each side the mean of its fastest third of 40 turns (a shared machine only adds time,
and its load falls on both alike). Before resent bodies were read from their prefix the ratio was 1.3-1.6.

What still grows is memory traffic, not work per message: the prefix compare of the resent body and one write of
the path's ids into the prompt. A new prompt buffer per turn made the ratio depend on the process's heap: in a long
test run's fragmented heap each turn's 128 KiB of new prompt pages faulted (~2 us a page), and the ratio reached 1.32
(a CI run failed on it). Prompts are now written over buffers earlier turns dropped (`tito.prompt_buffers`), so the
engine here keeps no request (an engine that holds every prompt keeps every buffer from reuse): 1.05-1.08 in a fresh
heap and a fragmented one alike (benchmarks/turn_growth.py), back under issue 34's 1.2.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from typing import Any

import orjson

from tests.server.asgi_client import AsgiClient
from tito.engines.instant import InstantEngine
from tito.server import ServerOptions, ServerState, create_app
from tito.server.commands.launch import instant_reply_ids
from tito.tokenizer import get_tito_tokenizer
from tito.tokenizer_loading import LocalTokenizer

WORDS = ("def", "class", "return", "import", "self", "value", "error", "test", "passed", "failed", "line", "file")


def text(tokens: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choices(WORDS, k=tokens))


def test_a_turn_costs_the_same_cpu_at_32k_tokens_as_at_2k(qwen3_tokenizer: LocalTokenizer) -> None:
    reply = instant_reply_ids(get_tito_tokenizer(qwen3_tokenizer, "qwen3"))
    engine = InstantEngine(lambda _: reply, record_requests=False)
    state = ServerState(qwen3_tokenizer, engine, ServerOptions(family="qwen3"))
    client = AsgiClient(create_app(state))

    async def run() -> dict[int, list[float]]:
        histories: dict[int, list[dict[str, Any]]] = {}
        paths: dict[int, str] = {}
        for size in (2_000, 32_000):
            session = (await client.post("/sessions", {}))[1]["session_id"]
            paths[size] = f"/sessions/{session}/v1/chat/completions"
            histories[size] = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": text(size, 0)}]
        cpu: dict[int, list[float]] = {2_000: [], 32_000: []}
        for turn in range(42):
            for size, messages in histories.items():
                body = orjson.dumps({"messages": messages})  # the client's work, not the server's
                started = time.thread_time()
                answer = (await client.post(paths[size], body))[1]
                spent = time.thread_time() - started
                if turn >= 2:  # the first builds the history; the second warms what the first turn did not use
                    cpu[size].append(spent)
                messages += [answer["choices"][0]["message"], {"role": "user", "content": text(150, turn + 1)}]
        return cpu

    cpu = asyncio.run(run())
    assert state.tokenizers.prompt_buffers.reused >= 80, "each of the 84 turns but the first writes over a prompt"
    small, large = (statistics.mean(sorted(cpu[size])[: len(cpu[size]) // 3]) for size in (2_000, 32_000))
    assert large / small <= 1.2, f"a turn at 32k tokens costs {large * 1e3:.2f} ms of CPU, at 2k {small * 1e3:.2f} ms"
