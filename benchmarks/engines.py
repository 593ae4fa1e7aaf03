"""Engine speed: the HTTP engine clients' own cost, and the embedded `local` engine's throughput and prefix cache.

Section `http` (issue #10 targets: client overhead under 1 ms per request excluding the engine; a 32k-token reply
parsed under 5 ms). The in-test SGLang server (tests/engines/servers.py) runs in its own process and answers a 9-id
prompt with 16 ids at once; requests go one at a time over a kept-alive connection:
  client   SGLangEngine.generate: builds the body, POSTs it, decodes and checks the reply into compact arrays
  floor    the same pre-built body POSTed with a bare httpx.AsyncClient, the reply bytes read, nothing parsed
  overhead = client - floor: what tito adds to each engine call
Reply parsing: one whole reply body, from bytes to a Generation's arrays:
  sglang   /generate: `output_ids` + `meta_info.output_token_logprobs` triples (3 JSON values per token)
  vllm     /v1/completions: `token_ids` + `logprobs.token_logprobs` (+ the `tokens` and `text_offset` vLLM adds)
  floor    orjson.loads of the same body alone: the least any JSON client pays
Each figure is the best of several rounds.

Section `local`, for each model (the seeded tiny Qwen3 on the real Qwen3 vocabulary, and SmolLM2-135M-Instruct):
  tok/s bs1 / bs8   sampled ids per second, one request alone and 8 concurrent requests (total), seeded sampling
                    at temperature 1 after a 32-id prompt, no stop token (every request samples --new-tokens ids)
  session           a 10-turn session (each turn appends --turn-tokens prompt ids after the previous prompt and
                    reply, then samples --sampled-per-turn ids), with the prefix cache (one session id) and
                    without (no session id): prompt ids prefilled, prefill seconds, their ratio, total seconds

Run from the repository root:
  PYTHONPATH=src python benchmarks/engines.py [--sections http local] [--requests 500] [--rounds 5] [--tokens 32768]
      [--models tiny smollm2] [--new-tokens 64] [--turn-tokens 500] [--sampled-per-turn 50] [--threads N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import orjson

from tito.engines.http import HttpEngineClient
from tito.engines.local import LocalEngine, build_tiny_model, default_model_dir
from tito.engines.protocol import GenerateRequest, SamplingParams
from tito.engines.sglang import SGLangEngine, generate_body, parse_reply
from tito.engines.vllm import completion_arrays, only_choice
from tito.tokenizer_loading import load_tokenizer

ROOT = Path(__file__).resolve().parents[1]
HTTP_OVERHEAD_TARGET_MS = 1.0
HTTP_PARSE_TARGET_MS = 5.0
HTTP_PROMPT = [151644, 872, 198, 9707, 151645, 198, 151644, 77091, 198]


@contextmanager
def http_fake_server(kind: str) -> Iterator[str]:
    """The in-test `kind` server in its own process on a free port; stopped (by its pid) on exit."""
    sys.path.insert(0, str(ROOT))
    from tests.engines.servers import free_port

    port = free_port()
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    command = [sys.executable, "-m", "tests.engines.servers", kind, str(port)]
    process = subprocess.Popen(command, cwd=ROOT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError(f"in-test {kind} server did not start") from None
                time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def http_request(index: int) -> GenerateRequest:
    return GenerateRequest(HTTP_PROMPT, SamplingParams(max_new_tokens=16), f"bench-{index}", "bench-session")


async def http_client_overhead(url: str, requests: int, rounds: int) -> tuple[float, float]:
    """(client ms, floor ms) per request, best round of each, the two interleaved round by round."""
    engine = SGLangEngine(url, timeout=30)
    bare = httpx.AsyncClient(base_url=url, timeout=30)
    body = orjson.dumps(generate_body(http_request(0), stream=False))
    headers = {"content-type": "application/json"}
    for index in range(50):  # warm up: connections open, code paths hot
        await engine.generate(http_request(index))
        (await bare.post("/generate", content=body, headers=headers)).read()
    best_client = best_floor = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        for index in range(requests):
            await engine.generate(http_request(index))
        best_client = min(best_client, (time.perf_counter() - started) / requests)
        started = time.perf_counter()
        for _ in range(requests):
            (await bare.post("/generate", content=body, headers=headers)).read()
        best_floor = min(best_floor, (time.perf_counter() - started) / requests)
    await engine.aclose()
    await bare.aclose()
    return best_client * 1e3, best_floor * 1e3


def http_sglang_reply(tokens: int) -> bytes:
    rng = random.Random(0)
    ids = [rng.randrange(151936) for _ in range(tokens)]
    meta = {
        "id": "bench",
        "finish_reason": {"type": "length", "length": tokens},
        "prompt_tokens": 9,
        "completion_tokens": tokens,
        "cached_tokens": 0,
        "weight_version": "default",
        "output_token_logprobs": [[-rng.random() * 10, token, None] for token in ids],
    }
    return orjson.dumps({"text": "", "output_ids": ids, "meta_info": meta})


def http_vllm_reply(tokens: int) -> bytes:
    rng = random.Random(0)
    ids = [rng.randrange(151936) for _ in range(tokens)]
    logprobs = {
        "text_offset": list(range(tokens)),
        "token_logprobs": [-rng.random() * 10 for _ in ids],
        "tokens": [f"<filler_{token}>" for token in ids],
        "top_logprobs": None,
    }
    choice = {"index": 0, "text": "", "logprobs": logprobs, "finish_reason": "length", "token_ids": ids}
    return orjson.dumps({"id": "cmpl-1", "choices": [choice], "usage": {"prompt_tokens": 9}})


def http_reply_parsing(tokens: int, rounds: int) -> dict[str, tuple[float, float]]:
    """(parse ms, JSON-decode floor ms) per engine: best time to turn its whole reply body into compact arrays."""
    decoder = HttpEngineClient("bench", "http://127.0.0.1:1", timeout=1)
    sglang_body, vllm_body = http_sglang_reply(tokens), http_vllm_reply(tokens)

    def parse_sglang() -> None:
        chunk = parse_reply(decoder.decode("/generate", sglang_body), already_received=0)
        assert len(chunk.ids) == tokens

    def parse_vllm() -> None:
        ids, _ = completion_arrays(only_choice(decoder.decode("/v1/completions", vllm_body)))
        assert len(ids) == tokens

    cases = {
        "sglang": parse_sglang,
        "sglang floor": lambda: orjson.loads(sglang_body),
        "vllm": parse_vllm,
        "vllm floor": lambda: orjson.loads(vllm_body),
    }
    best = dict.fromkeys(cases, float("inf"))
    for _ in range(rounds):
        for name, parse in cases.items():
            started = time.perf_counter()
            parse()
            best[name] = min(best[name], (time.perf_counter() - started) * 1e3)
    asyncio.run(decoder.aclose())
    return {name: (best[name], best[f"{name} floor"]) for name in ("sglang", "vllm")}


def local_engine(model: str, workdir: Path, threads: int | None = None) -> LocalEngine:
    """`tiny`: the seeded tiny Qwen3 (2 layers, hidden 64, Qwen3 vocabulary); `smollm2`: the default model."""
    if model == "tiny":
        directory = build_tiny_model(load_tokenizer("qwen3"), workdir / "tiny", seed=0)
        return LocalEngine.from_model_dir(directory, threads=threads)
    return LocalEngine.from_model_dir(default_model_dir(), threads=threads)


def _sampled(
    prompt_ids: list[int], new_tokens: int, seed: int, request_id: str, session_id: str | None = None
) -> GenerateRequest:
    params = SamplingParams(max_new_tokens=new_tokens, temperature=1.0, seed=seed)
    return GenerateRequest(prompt_ids, params, request_id, session_id)


def local_tokens_per_second(engine: LocalEngine, batch: int, new_tokens: int, vocab: int) -> float:
    """Sampled ids per second over `batch` concurrent requests (total), prefill of a 32-id prompt included."""
    rng = random.Random(batch)
    requests = [
        _sampled([rng.randrange(vocab) for _ in range(32)], new_tokens, i, f"tps-{batch}-{i}") for i in range(batch)
    ]

    async def run() -> int:
        generations = await asyncio.gather(*(engine.generate(request) for request in requests))
        return sum(len(generation.output_ids) for generation in generations)

    started = time.perf_counter()
    sampled = asyncio.run(run())
    return sampled / (time.perf_counter() - started)


@dataclass(frozen=True)
class SessionCost:
    prefill_tokens: int
    prefill_seconds: float
    total_seconds: float
    cached_tokens: int


def local_session_cost(
    engine: LocalEngine, use_prefix_cache: bool, turns: int, turn_tokens: int, sampled_per_turn: int, vocab: int
) -> SessionCost:
    """One multi-turn session: each turn's prompt is the last prompt + its reply + `turn_tokens` new ids."""
    rng = random.Random(0)
    session_id = f"bench-{time.monotonic_ns()}" if use_prefix_cache else None
    prompt: list[int] = []
    cached = 0
    before_tokens, before_seconds = engine.stats.prefill_tokens, engine.stats.prefill_seconds
    started = time.perf_counter()
    for turn in range(turns):
        prompt = prompt + [rng.randrange(vocab) for _ in range(turn_tokens)]
        request = _sampled(prompt, sampled_per_turn, turn, f"{session_id or 'nocache'}-{turn}", session_id)
        generation = asyncio.run(engine.generate(request))
        cached += generation.cached_tokens
        prompt = prompt + generation.output_ids.tolist()
    return SessionCost(
        engine.stats.prefill_tokens - before_tokens,
        engine.stats.prefill_seconds - before_seconds,
        time.perf_counter() - started,
        cached,
    )


def http_section(args: argparse.Namespace) -> None:
    with http_fake_server("sglang") as url:
        client_ms, floor_ms = asyncio.run(http_client_overhead(url, args.requests, args.rounds))
    overhead = client_ms - floor_ms
    header = f"{'http client':<14}{'client ms':>10}{'floor ms':>10}{'overhead ms':>13}"
    print(f"{header}  target < {HTTP_OVERHEAD_TARGET_MS}")
    verdict = "met" if overhead < HTTP_OVERHEAD_TARGET_MS else "MISSED"
    print(f"{'sglang':<14}{client_ms:>10.3f}{floor_ms:>10.3f}{overhead:>13.3f}  {verdict}")

    parse_ms = http_reply_parsing(args.tokens, args.rounds * 4)
    print(f"\n{'reply parsing':<14}{'tokens':>10}{'parse ms':>10}{'floor ms':>10}  target < {HTTP_PARSE_TARGET_MS}")
    for name, (ms, floor) in parse_ms.items():
        verdict = "met" if ms < HTTP_PARSE_TARGET_MS else "MISSED"
        print(f"{name:<14}{args.tokens:>10}{ms:>10.2f}{floor:>10.2f}  {verdict}")


def local_section(args: argparse.Namespace) -> None:
    print(
        f"{'model':8} {'tok/s bs1':>9} {'tok/s bs8':>9} {'prefilled':>17} {'prefill s':>15} "
        f"{'prefill ratio':>13} {'session s':>13}"
    )
    with tempfile.TemporaryDirectory() as workdir:
        for model in args.models:
            engine = local_engine(model, Path(workdir), args.threads)
            vocab = engine.vocab_size
            local_tokens_per_second(engine, 1, 4, vocab)  # warm-up: first-touch of the weights
            single = local_tokens_per_second(engine, 1, args.new_tokens, vocab)
            batched = local_tokens_per_second(engine, 8, args.new_tokens, vocab)
            shape = (args.turns, args.turn_tokens, args.sampled_per_turn, vocab)
            fresh = local_session_cost(engine, False, *shape)
            reused = local_session_cost(engine, True, *shape)
            asyncio.run(engine.aclose())
            print(
                f"{model:8} {single:9.1f} {batched:9.1f} {fresh.prefill_tokens:>8}/{reused.prefill_tokens:<8} "
                f"{fresh.prefill_seconds:7.2f}/{reused.prefill_seconds:<7.2f} "
                f"{fresh.prefill_seconds / reused.prefill_seconds:13.1f} "
                f"{fresh.total_seconds:6.1f}/{reused.total_seconds:<6.1f}",
                flush=True,
            )
    print("prefilled, prefill s, session s: without / with the prefix cache", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sections", nargs="+", choices=("http", "local"), default=["http", "local"])
    parser.add_argument("--requests", type=int, default=500, help="http: requests per round [500]")
    parser.add_argument("--rounds", type=int, default=5, help="http: rounds; the best is kept [5]")
    parser.add_argument("--tokens", type=int, default=32768, help="http: reply length to parse [32768]")
    parser.add_argument("--models", nargs="+", choices=("tiny", "smollm2"), default=["tiny", "smollm2"])
    parser.add_argument("--new-tokens", type=int, default=64, help="local: ids sampled per request for tok/s [64]")
    parser.add_argument("--turns", type=int, default=10, help="local: turns of the session [10]")
    parser.add_argument("--turn-tokens", type=int, default=500, help="local: new prompt ids per turn [500]")
    parser.add_argument("--sampled-per-turn", type=int, default=50, help="local: ids sampled per turn [50]")
    parser.add_argument("--threads", type=int, default=None, help="local: torch threads [torch's default]")
    args = parser.parse_args()
    if "http" in args.sections:
        http_section(args)
    if "local" in args.sections:
        local_section(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
