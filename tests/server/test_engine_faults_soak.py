"""Soak: 100 sessions x 10 turns, every engine call faulted with chance 5% (seeded), 25 sessions at a time.

The full soak takes ~15 s per engine on a loaded 2-core machine: it is marked `soak` and run by .ci/run
(`pytest -m soak`); the default run soaks 10 sessions per engine (a few seconds).

Every request is a committed turn or a clear 5xx naming the engine's fault (never a 4xx); the client retries a 5xx
as the openai SDK does (`x-stainless-retry-count`), so every session ends with its 10 turns; every session's sample
then equals a fault-free session's, token for token, mask and logprobs (nothing partial, nothing twice), also after
a restart from the server's journal; and the faults counted by `tito_engine_faults` are the error replies. Every
third turn is streamed.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.engines.fake_engine import FAULTS, FaultPlan
from tests.server.conftest import FaultServer, running_fault_server
from tests.server.test_engine_faults import EXPECTED
from tito.tokenizer_loading import LocalTokenizer

TURNS, RATE, SEED = 10, 0.05, 24
CONCURRENT = 25
"""Sessions in flight at once (more only queue on this 2-core machine, and a queued call can pass the timeout)."""
ENGINE_ERRORS = {"EngineUnavailableError": 503, "EngineResponseError": 502, "EngineTimeoutError": 504}


class Tally:
    def __init__(self) -> None:
        self.committed = 0
        self.errors: Counter[tuple[int, str]] = Counter()


async def one_turn(
    http: httpx.AsyncClient, session_id: str, messages: list[dict[str, Any]], stream: bool, retry: int
) -> dict[str, Any] | tuple[int, dict[str, Any]]:
    """The assistant message of a committed turn, or (status, error) of a failed one."""
    url = f"/sessions/{session_id}/v1/chat/completions"
    headers = {"x-stainless-retry-count": str(retry)} if retry else {}
    body = {"messages": messages, "stream": stream}
    if not stream:
        response = await http.post(url, json=body, headers=headers)
        if response.status_code == 200:
            return dict(response.json()["choices"][0]["message"])
        return response.status_code, response.json()["error"]
    content, event = "", "message"
    async with http.stream("POST", url, json=body, headers=headers) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                event = line[len("event: ") :]
            elif line.startswith("data: ") and line != "data: [DONE]":
                data = orjson.loads(line[len("data: ") :])
                if event == "error":
                    error = data["error"]
                    return ENGINE_ERRORS.get(error["type"], 0), error
                for choice in data["choices"]:
                    content += choice["delta"].get("content") or ""
    return {"role": "assistant", "content": content}


async def agent(http: httpx.AsyncClient, tally: Tally) -> str:
    """One session's 10 turns, each retried on a 5xx until it commits; returns the session id."""
    session_id = (await http.post("/sessions")).json()["session_id"]
    messages: list[dict[str, Any]] = []
    for index in range(TURNS):
        messages.append({"role": "user", "content": f"turn {index}"})
        for retry in range(20):
            outcome = await one_turn(http, session_id, messages, stream=index % 3 == 2, retry=retry)
            if isinstance(outcome, dict):
                tally.committed += 1
                messages.append(outcome)
                break
            status, error = outcome
            assert ENGINE_ERRORS.get(error["type"]) == status, (status, error)  # a clear 5xx, never a 4xx
            assert error["engine"] in error["message"] and error["code"], error
            tally.errors[status, error["code"]] += 1
        else:
            raise AssertionError(f"session {session_id}: turn {index} never committed")
    return session_id


async def soak(url: str, tally: Tally, sessions: int) -> list[str]:
    gate = asyncio.Semaphore(CONCURRENT)

    async def gated() -> str:
        async with gate:
            return await agent(http, tally)

    async with httpx.AsyncClient(base_url=url, timeout=30, limits=httpx.Limits(max_connections=CONCURRENT)) as http:
        return list(await asyncio.gather(*(gated() for _ in range(sessions))))


def sample(server: FaultServer, session_id: str) -> tuple[list[int], list[int], list[float]]:
    (only,) = server.http.post(f"/sessions/{session_id}/samples").json()["samples"]
    return only["tokens"], only["loss_mask"], only["rollout_logprobs"]


@pytest.mark.parametrize("sessions", [10, pytest.param(100, marks=pytest.mark.soak)])
@pytest.mark.parametrize("kind", ["sglang", "vllm"])
def test_a_soak_with_random_engine_faults_commits_every_turn_once_or_fails_it_clearly(
    kind: str, sessions: int, qwen3_tokenizer: LocalTokenizer, tmp_path: Path
) -> None:
    with running_fault_server(qwen3_tokenizer, kind, tmp_path, engine_timeout=1.0) as server:
        server.fake.behaviour.reply_ids = [*qwen3_tokenizer.encode("Fine.", add_special_tokens=False), 151645]
        reference = Tally()
        (clean,) = asyncio.run(_one_agent(server.url, reference))
        server.fake.plan = FaultPlan(rate=RATE, rng=random.Random(SEED), kinds=FAULTS)
        tally = Tally()
        session_ids = asyncio.run(soak(server.url, tally, sessions))
        expected = sample(server, clean)
        assert all(sample(server, session_id) == expected for session_id in session_ids)
        counted = _fault_counts(server.http.get("/metrics").text)
    with running_fault_server(qwen3_tokenizer, kind, tmp_path) as restarted:  # the journal holds the same turns
        assert all(sample(restarted, session_id) == expected for session_id in session_ids)
    injected = Counter(EXPECTED[fault][2] for fault in server.fake.plan.injected)
    assert tally.committed == sessions * TURNS and injected.total() > sessions * TURNS * RATE / 2
    errors = Counter({code: n for (_, code), n in tally.errors.items()})
    # Every fault was an error reply; a timeout may also come from load alone (a 2-core machine shared by many).
    assert errors - Counter(timeout=errors["timeout"]) == injected - Counter(timeout=injected["timeout"])
    assert errors["timeout"] >= injected["timeout"]
    assert errors == Counter({kind: int(n) for kind, n in counted.items() if kind != "abort_failed"})


async def _one_agent(url: str, tally: Tally) -> list[str]:
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        return [await agent(http, tally)]


_FAULT_LINE = re.compile(
    r'^tito_engine_faults_total\{engine="[^"]+",kind="([^"]+)",process="[^"]+"\} (\S+)$', re.MULTILINE
)


def _fault_counts(text: str) -> dict[str, float]:
    return {kind: float(value) for kind, value in _FAULT_LINE.findall(text)}
