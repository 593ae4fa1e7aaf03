"""Scale-out behind a real nginx: two `tito serve --journal-shared` processes, two in-test SGLang engines.

nginx hashes each session's requests to one tito process (`hash $tito_session_key consistent`; creation is hashed
by the id nginx mints and tito adopts) and each engine request to one engine by the session's routing key. Agents
speak through the official openai SDK (its retries honour tito's 503 `Retry-After`).
1. 100 sessions x 5 turns: every session's replies come from the process that created it, every session's engine
   requests reach one engine with the session id as routing key (also after the takeover below, from the other
   tito process).
2. The same sessions 5 turns more; one process is killed with `kill -9` mid-load: every session it held goes on
   at the other process from the journal, every session holds exactly the turns its agent received (none lost),
   and every session's samples equal those of an uninterrupted run on one in-process server, bit for bit: every
   prompt after the takeover was token-exact.
Marked `crash` (two server processes, ~20-40 s on a loaded 2-core machine; in the default run).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.conftest import REQUIRE_BINARIES, unavailable
from tests.engines.fake_engine import FakeServer, scripted_id
from tests.engines.fake_sglang import sglang_app
from tests.engines.servers import ServerThread
from tests.server.cluster import NGINX, Nginx, TitoProcess, free_ports
from tests.server.journal_agent import comparable
from tito.journal.leases import fence
from tito.journal.shared import SharedJournalLayout
from tito.server import ServerOptions, create_app
from tito.server.commands.launch import build_state
from tito.server.commands.running import serve_in_thread

pytestmark = pytest.mark.crash

SESSIONS, TURNS = 100, 5
KILL_AFTER = 150
"""Phase 2 turns completed before one process is killed (of SESSIONS * TURNS)."""
PHASE_TIMEOUT_S = 120.0
REPLY_IDS = 8


@dataclass
class Agent:
    """One session's client: deterministic messages per (index, turn), the replies it received and who sent them."""

    index: int
    session_id: str = ""
    created_by: str = ""
    messages: list[dict[str, Any]] = field(default_factory=list)
    received: list[str] = field(default_factory=list)
    processes: list[str] = field(default_factory=list)
    """The `X-Tito-Process` of each reply, in order."""

    async def open(self, http: httpx.AsyncClient) -> None:
        response = await http.post("/sessions")
        assert response.status_code == 200, response.text
        self.session_id = response.json()["session_id"]
        self.created_by = response.headers.get("x-tito-process", "")

    async def turn(self, http: httpx.AsyncClient, base_url: str) -> None:
        turn = len(self.received)
        self.messages.append({"role": "user", "content": f"Agent {self.index}, step {turn}: report the result."})
        client = openai.AsyncOpenAI(
            base_url=f"{base_url}/sessions/{self.session_id}/v1", api_key="-", http_client=http, max_retries=30
        )
        raw = await client.chat.completions.with_raw_response.create(model="tiny", messages=self.messages)  # type: ignore[arg-type]
        reply = raw.http_response.json()
        message = reply["choices"][0]["message"]
        self.messages.append({key: value for key, value in message.items() if value is not None})
        self.received.append(reply["id"])
        self.processes.append(raw.headers.get("x-tito-process", ""))


async def drive(agents: list[Agent], base_url: str, turns: int, done: list[int] | None = None) -> None:
    """Every agent takes `turns` turns, all agents concurrently; `done` counts completed turns."""
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    async with httpx.AsyncClient(base_url=base_url, timeout=60, limits=limits) as http:

        async def run(agent: Agent) -> None:
            if not agent.session_id:
                await agent.open(http)
            for _ in range(turns):
                await agent.turn(http, base_url)
                if done is not None:
                    done[0] += 1

        await asyncio.wait_for(asyncio.gather(*(run(agent) for agent in agents)), PHASE_TIMEOUT_S)


def engines_by_session(engines: list[FakeServer]) -> dict[str, set[str]]:
    """Which engines each session's generate requests reached, by the routing key they carried."""
    found: dict[str, set[str]] = defaultdict(set)
    for engine in engines:
        for request in engine.requests:
            if request.path == "/generate":
                assert request.headers["x-smg-routing-key"] == request.body["routing_key"]
                found[request.body["routing_key"]].add(engine.name)
    return dict(found)


def stored_turns(http: httpx.Client, session_id: str) -> list[str]:
    response = http.get(f"/sessions/{session_id}")
    assert response.status_code == 200, response.text
    return [turn["response_id"] for turn in response.json()["turns"]]


@dataclass
class Cluster:
    nginx: Nginx
    processes: dict[str, TitoProcess]
    engines: list[FakeServer]
    journal: Path


class StoppingEngine(FakeServer):
    """The in-test SGLang "model", but every reply is 8 prompt-dependent ids and the first stop id (a reply cut by
    the length limit cannot be continued)."""

    def sample(self, prompt: list[int], max_tokens: int, stop_ids: list[int]) -> tuple[list[int], str, int | None]:
        ids = [scripted_id(prompt, position) for position in range(min(REPLY_IDS, max_tokens - 1))]
        return [*ids, stop_ids[0]], "stop", stop_ids[0]


@pytest.fixture
def engines() -> Iterator[list[FakeServer]]:
    servers = [StoppingEngine(name=f"engine-{index}") for index in range(2)]
    threads = [ServerThread(sglang_app(server)).start() for server in servers]
    for server, thread in zip(servers, threads, strict=True):
        server.url = thread.url
    yield list(servers)
    for thread in threads:
        thread.stop()


@pytest.fixture
def cluster(tmp_path: Path, engines: list[FakeServer]) -> Iterator[Cluster]:
    """One nginx routing sessions to two tito processes and engine requests to two engines."""
    if NGINX is None:
        unavailable("nginx is not installed (apt-get install nginx; .ci/run installs it)", REQUIRE_BINARIES)
    journal = tmp_path / "journal"
    tito_a, tito_b, router_port, engine_router_port = free_ports(4)
    ports = {"tito-a": tito_a, "tito-b": tito_b}
    router = Nginx(
        tmp_path / "nginx",
        [f"127.0.0.1:{port}" for port in ports.values()],
        engine_addresses=[engine.url.removeprefix("http://") for engine in engines],
        ports=(router_port, engine_router_port),
    )
    processes: dict[str, TitoProcess] = {}
    try:
        for name, port in ports.items():
            engine_args = ["--engine", "sglang", "--engine-url", router.engine_url]
            processes[name] = TitoProcess(name, journal, tmp_path / f"{name}.log", engine_args, port)
        for process in processes.values():
            process.wait_ready()
        yield Cluster(router, processes, engines, journal)
    finally:
        for process in processes.values():
            process.stop()
        router.stop()


def reference_samples(engine: FakeServer, indices: list[int], turns: int) -> list[list[Any]]:
    """The same agents on one in-process server, never interrupted: the samples a correct takeover must equal."""
    state = build_state(ServerOptions(family="qwen3"), engine="sglang", engine_url=engine.url)
    with serve_in_thread(create_app(state)) as url:
        agents = [Agent(index) for index in indices]
        asyncio.run(drive(agents, url, turns))
        with httpx.Client(base_url=url, timeout=30) as http:
            return [samples(http, agent.session_id) for agent in agents]


def samples(http: httpx.Client, session_id: str) -> list[Any]:
    """The session's samples as compared: session id and the engine's wall-clock timings blanked."""
    response = http.post(f"/sessions/{session_id}/samples", params={"format": "safetensors"})
    assert response.status_code == 200, response.text
    compared = []
    for *arrays, metadata in comparable(response.content):
        turns = [{**turn, "timings": "-"} for turn in metadata["turns"]]
        compared.append((*arrays, {**metadata, "turns": turns}))
    return compared


def sampled_where_stored_prefix_was_the_prompt(sample: Any) -> bool:
    """Every sampled span (loss mask 1) is what the engine samples for exactly the stored ids before it: each
    prompt the engine got was the stored trajectory, token for token."""
    tokens, loss_mask = array("i", sample[0]).tolist(), array("B", sample[1]).tolist()
    position = 0
    while position < len(tokens):
        if loss_mask[position] != 1:
            position += 1
            continue
        prompt = tokens[:position]
        expected = [scripted_id(prompt, offset) for offset in range(REPLY_IDS)]
        if tokens[position : position + REPLY_IDS] != expected:
            return False
        position += REPLY_IDS + 1
    return True


def test_sessions_stay_on_one_process_and_survive_a_kill_9_token_exact(cluster: Cluster) -> None:
    agents = [Agent(index) for index in range(SESSIONS)]
    asyncio.run(drive(agents, cluster.nginx.url, TURNS))

    created = Counter(agent.created_by for agent in agents)
    assert set(created) == set(cluster.processes), f"both processes must create sessions: {created}"
    for agent in agents:
        assert set(agent.processes) == {agent.created_by}, f"session {agent.session_id} moved: {agent.processes}"
    engine_of = engines_by_session(cluster.engines)
    assert set(engine_of) == {agent.session_id for agent in agents}, "every engine request carries its session id"
    assert all(len(names) == 1 for names in engine_of.values()), "a session's engine requests reached two engines"
    assert len({next(iter(names)) for names in engine_of.values()}) == 2, "both engines serve sessions"

    victim_name = max(created, key=lambda name: created[name])
    victim, survivor = cluster.processes[victim_name], next(p for n, p in cluster.processes.items() if n != victim_name)
    done = [0]
    replies_before_kill: dict[int, int] = {}

    async def phase_two() -> None:
        async def kill_mid_load() -> None:
            while done[0] < KILL_AFTER:
                await asyncio.sleep(0.005)
            os.kill(victim.process.pid, signal.SIGKILL)
            replies_before_kill.update({agent.index: len(agent.processes) for agent in agents})

        killer = asyncio.create_task(kill_mid_load())
        await drive(agents, cluster.nginx.url, TURNS, done)
        await killer

    asyncio.run(phase_two())
    victim.process.wait(10)
    assert done[0] == SESSIONS * TURNS

    assert engines_by_session(cluster.engines) == engine_of, "after the takeover each session keeps its engine"
    held = [agent for agent in agents if agent.created_by == victim_name]
    after_kill = {name for agent in held for name in agent.processes[replies_before_kill[agent.index] + 1 :]}
    assert after_kill == {survivor.name}, "the dead process's sessions must go on at the other one"
    with httpx.Client(base_url=cluster.nginx.url, timeout=30) as http:
        for agent in agents:
            assert stored_turns(http, agent.session_id) == agent.received, f"session {agent.session_id} lost a turn"
        takeovers = http.get(f"http://{survivor.address}/metrics").text
        assert f'tito_sessions_taken_over_total{{process="{survivor.name}"}} {float(len(held))}' in takeovers
        got = {agent.index: samples(http, agent.session_id) for agent in agents}
    for agent in agents:
        assert all(sampled_where_stored_prefix_was_the_prompt(sample) for sample in got[agent.index]), agent.index
    moved = [agent.index for agent in held]
    expected = reference_samples(cluster.engines[0], moved, 2 * TURNS)
    for index, reference in zip(moved, expected, strict=True):
        assert got[index] == reference, f"agent {index}: {first_difference(got[index], reference)}"


def first_difference(mine: list[Any], reference: list[Any]) -> str:
    """Which part of which sample differs (tokens, loss mask, logprobs, length, status or metadata)."""
    if len(mine) != len(reference):
        return f"{len(mine)} samples, expected {len(reference)}"
    parts = ("tokens", "loss_mask", "rollout_logprobs", "response_length", "status", "metadata")
    for index, (got, want) in enumerate(zip(mine, reference, strict=True)):
        for part, a, b in zip(parts, got, want, strict=True):
            if a != b:
                return f"sample {index}: {part} differs: {a!r:.300} != {b!r:.300}"
    return "equal"


def test_a_fenced_process_stops_serving_with_a_retryable_503(tmp_path: Path) -> None:
    """A process another one declared dead (its lease fenced) writes no more: /ready and /health answer 503, and a
    session request gets a 503 with Retry-After instead of a turn on a session it may no longer own."""
    process = TitoProcess("solo", tmp_path / "journal", tmp_path / "solo.log", ["--engine", "instant"])
    try:
        process.wait_ready()
        with httpx.Client(base_url=f"http://{process.address}", timeout=10) as http:
            session_id = http.post("/sessions").json()["session_id"]
            layout = SharedJournalLayout(tmp_path / "journal")
            fence(layout, layout.stream_epochs()[-1], by_epoch=99)
            deadline = time.monotonic() + 5  # the lease is renewed every ttl/4 (0.5 s): it finds the fence by then
            while http.get("/ready").status_code == 200 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert http.get("/ready").status_code == 503
            assert http.get("/health").status_code == 503
            body = {"messages": [{"role": "user", "content": "hi"}]}
            response = http.post(f"/sessions/{session_id}/v1/chat/completions", json=body)
            assert response.status_code == 503, response.text
            assert response.json()["error"]["type"] == "LeaseLostError"
            assert response.headers["retry-after"] == "1"
    finally:
        process.stop()
