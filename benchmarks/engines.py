"""HTTP engine client cost: tito's SGLang client side by side with a bare HTTP call, and reply parsing at 32k tokens.

Client overhead (issue #10 target: under 1 ms per request, excluding the engine). The in-test SGLang server
(tests/engines/servers.py) runs in its own process and answers a 9-id prompt with 16 ids at once; requests go one
at a time over a kept-alive connection:
  client   SGLangEngine.generate: builds the body, POSTs it, decodes and checks the reply into compact arrays
  floor    the same pre-built body POSTed with a bare httpx.AsyncClient, the reply bytes read, nothing parsed
  overhead = client - floor: what tito adds to each engine call
Reply parsing (target: under 5 ms for a 32k-token reply): one whole reply body, from bytes to a Generation's arrays:
  sglang   /generate: `output_ids` + `meta_info.output_token_logprobs` triples (3 JSON values per token)
  vllm     /v1/completions: `token_ids` + `logprobs.token_logprobs` (+ the `tokens` and `text_offset` vLLM adds)
  floor    orjson.loads of the same body alone: the least any JSON client pays
Each figure is the best of several rounds. Run from the repository root:
  PYTHONPATH=src python benchmarks/engines.py [--requests 500] [--rounds 5] [--tokens 32768]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import orjson

from tito.engines.http import HttpEngineClient
from tito.engines.protocol import GenerateRequest, SamplingParams
from tito.engines.sglang import SGLangEngine, generate_body, parse_reply
from tito.engines.vllm import completion_arrays, only_choice

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500, help="requests per round [default: 500]")
    parser.add_argument("--rounds", type=int, default=5, help="rounds; the best is kept [default: 5]")
    parser.add_argument("--tokens", type=int, default=32768, help="reply length to parse [default: 32768]")
    args = parser.parse_args()

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


if __name__ == "__main__":
    main()
