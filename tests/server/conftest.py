"""Server fixtures: a real uvicorn server on 127.0.0.1 (a free port) in front of a scripted instant engine.

The engine's replies are scripted per test (`ScriptedEngine.queue`), and it can be told to fail, hang or
answer malformed, so every engine failure path runs through the real HTTP stack. `fault_server` is the same server
in front of tito's real SGLang or vLLM client and the in-test engine server with its faults (tests/engines/faults.py),
journaled.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.engines.fake_engine import FakeServer
from tests.engines.faults import FaultSwitch, dead_port, http_engine
from tests.engines.servers import start_fake
from tito.engines.instant import InstantEngine
from tito.engines.protocol import EngineInfo, Finish, FinishKind, GenerateRequest, Generation, GenerationChunk
from tito.errors import EngineResponseError, EngineUnavailableError
from tito.server import ServerOptions, ServerState, create_app
from tito.server.commands.launch import instant_reply_ids
from tito.server.commands.running import serve_in_thread
from tito.tokenizer import get_tito_tokenizer
from tito.tokenizer_loading import LocalTokenizer


class ScriptedEngine:
    """The instant engine with a queue of scripted replies (else a default one) and injectable faults."""

    def __init__(self, default_reply: Sequence[int]) -> None:
        self.default_reply = list(default_reply)
        self.replies: deque[list[int]] = deque()
        self.fault: str | None = None
        """None, `down` (unreachable), `hang` (never answers in time), `malformed` (ids without logprobs), `break`
        (a stream fails after its first chunk)."""
        self.delay = 0.0
        """Seconds a reply takes (cut short by an abort); in a stream, the time before each chunk."""
        self.aborted: list[str] = []
        """The request ids the server aborted, in order."""
        self.inner = InstantEngine(self._script)

    def _script(self, request: GenerateRequest) -> Sequence[int]:
        return self.replies.popleft() if self.replies else self.default_reply

    def queue(self, *replies: Sequence[int]) -> None:
        self.replies.extend(list(reply) for reply in replies)

    @property
    def requests(self) -> list[GenerateRequest]:
        return self.inner.requests

    @property
    def info(self) -> EngineInfo:
        return self.inner.info

    async def generate(self, request: GenerateRequest) -> Generation:
        if self.fault == "down":
            raise EngineUnavailableError("instant", "connection refused (scripted)")
        generation = await self.inner.generate(request)  # records the request first: tests see it in flight
        if self.fault == "hang":
            await asyncio.sleep(30)
        if self.delay and await self._aborted_within(request.request_id, self.delay):
            return replace(generation, finish=Finish(FinishKind.ABORT, detail="aborted by the client"))
        if self.fault == "malformed":
            return replace(generation, output_logprobs=generation.output_logprobs[:0])
        return generation

    async def stream(self, request: GenerateRequest) -> AsyncIterator[GenerationChunk]:
        """The instant engine's stream, `delay` before each chunk; fault `break` fails it after the first chunk."""
        if self.fault == "down":
            raise EngineUnavailableError("instant", "connection refused (scripted)")
        async for chunk in self.inner.stream(request):
            if self.delay and await self._aborted_within(request.request_id, self.delay):
                yield GenerationChunk(chunk.ids[:0], chunk.logprobs[:0], Finish(FinishKind.ABORT))
                return
            yield chunk
            if self.fault == "break":
                raise EngineResponseError("instant", "connection reset mid-stream (scripted)")

    async def _aborted_within(self, request_id: str, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if request_id in self.aborted:
                return True
            await asyncio.sleep(0.01)
        return request_id in self.aborted

    async def health(self) -> None:
        if self.fault == "down":
            raise EngineUnavailableError("instant", "connection refused (scripted)")

    async def abort(self, request_id: str) -> None:
        self.aborted.append(request_id)
        await self.inner.abort(request_id)

    async def aclose(self) -> None:
        return None


class Server:
    """A running server: its base URL, state and engine."""

    def __init__(self, url: str, state: ServerState, engine: ScriptedEngine) -> None:
        self.url = url
        self.state = state
        self.engine = engine
        self.http = httpx.Client(base_url=url, timeout=10)

    def new_session(self, **body: object) -> str:
        response = self.http.post("/sessions", json=body or None)
        assert response.status_code == 200, response.text
        return str(response.json()["session_id"])

    def chat_url(self, session_id: str) -> str:
        return f"{self.url}/sessions/{session_id}/v1"


ServerFactory = Callable[..., Server]


@contextlib.contextmanager
def running_server(tokenizer: LocalTokenizer, **options: Any) -> Iterator[Server]:
    """A server (qwen3 family, scripted engine) with `options`, stopped when the block ends (tests that restart)."""
    engine = ScriptedEngine(instant_reply_ids(get_tito_tokenizer(tokenizer, "qwen3")))
    state = ServerState(tokenizer, engine, ServerOptions(family="qwen3", **options))
    with serve_in_thread(create_app(state)) as url:
        yield Server(url, state, engine)


@pytest.fixture(scope="module")
def serve(qwen3_tokenizer: LocalTokenizer) -> Iterator[ServerFactory]:
    """Start servers with given options (qwen3 family, scripted engine); all are stopped at module end."""
    with contextlib.ExitStack() as stack:
        yield lambda **options: stack.enter_context(running_server(qwen3_tokenizer, **options))


@pytest.fixture(scope="module")
def server(serve: ServerFactory) -> Server:
    return serve()


@pytest.fixture(autouse=True)
def _reset_engine(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "server" in request.fixturenames:
        engine: ScriptedEngine = request.getfixturevalue("server").engine
        engine.fault, engine.delay = None, 0.0
        engine.replies.clear()
        engine.aborted.clear()


class FaultServer(Server):
    """A journaled server in front of an in-test SGLang or vLLM server that injects faults (`fake.plan`)."""

    def __init__(self, url: str, state: ServerState, fake: FakeServer, journal: Path) -> None:
        super().__init__(url, state, state.engine.inner)  # type: ignore[arg-type]
        self.fake = fake
        self.journal = journal
        self.kind = state.engine.info.name


@contextlib.contextmanager
def running_fault_server(tokenizer: LocalTokenizer, kind: str, journal: Path, **options: Any) -> Iterator[FaultServer]:
    """A `FaultServer` for engine `kind` (see tests.engines.faults.http_engine); its aborts time out after 0.2 s."""
    fake, thread = start_fake(kind)
    refusing = dead_port()
    with contextlib.closing(refusing):
        dead_url = f"http://127.0.0.1:{refusing.getsockname()[1]}"
        engine = FaultSwitch(fake, http_engine(kind, fake.url, 30.0), http_engine(kind, dead_url, 30.0))
        state = ServerState(tokenizer, engine, ServerOptions(family="qwen3", journal=journal, **options))
        state.engine.abort_timeout = 0.2
        try:
            with serve_in_thread(create_app(state)) as url:
                yield FaultServer(url, state, fake, journal)
        finally:
            thread.stop()


@pytest.fixture(scope="module", params=["sglang", "vllm"])
def fault_server(
    request: pytest.FixtureRequest, qwen3_tokenizer: LocalTokenizer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FaultServer]:
    """A `FaultServer` per engine kind (`engine_timeout` 30 s), shared by a module's tests; reset by each test."""
    kind = str(request.param)
    with running_fault_server(qwen3_tokenizer, kind, tmp_path_factory.mktemp(kind), engine_timeout=30.0) as server:
        yield server


@pytest.fixture
def faulty(fault_server: FaultServer, qwen3_tokenizer: LocalTokenizer) -> FaultServer:
    """The module's fault server, its engine reset to answer a short reply that ends with <|im_end|>."""
    fault_server.fake.reset()
    fault_server.fake.behaviour.reply_ids = [*qwen3_tokenizer.encode("Fine, thanks.", add_special_tokens=False), 151645]
    return fault_server
