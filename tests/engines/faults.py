"""The fault-injecting engine for server tests: tito's real SGLang or vLLM client in front of the in-test server,
whose `FaultPlan` picks each call's fault (tests/engines/fake_engine.py).

`FaultSwitch` draws the fault of each generate call before it leaves, so one plan covers every fault: `refused`
sends the call to a port that is bound but never listens (a real ECONNREFUSED through the real client), every other
fault is served by the in-test server, which finds it by the request id.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator

from tests.engines.fake_engine import FakeServer
from tito.engines.protocol import Engine, EngineInfo, GenerateRequest, Generation, GenerationChunk
from tito.engines.sglang import SGLangEngine
from tito.engines.vllm import VLLMEngine


def dead_port() -> socket.socket:
    """A socket bound to a free port and never listening: connecting to it is refused. Keep it open while used."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock


def http_engine(kind: str, url: str, timeout: float) -> Engine:
    """`sglang`, `vllm` (its completions API) or `vllm-generate` (`/inference/v1/generate` for whole replies)."""
    if kind == "sglang":
        return SGLangEngine(url, timeout=timeout)
    return VLLMEngine(
        url, timeout=timeout, model="tiny", endpoint="generate" if kind == "vllm-generate" else "completions"
    )


class FaultSwitch:
    """An engine that sends each call where its drawn fault says: the live in-test server or the dead port."""

    def __init__(self, server: FakeServer, live: Engine, refusing: Engine) -> None:
        self.server = server
        self.live = live
        self.refusing = refusing

    @property
    def info(self) -> EngineInfo:
        return self.live.info

    def _route(self, request: GenerateRequest) -> Engine:
        fault = self.server.plan.draw()
        if fault == "refused":
            return self.refusing
        self.server.assigned[request.request_id] = fault
        return self.live

    async def generate(self, request: GenerateRequest) -> Generation:
        return await self._route(request).generate(request)

    async def stream(self, request: GenerateRequest) -> AsyncIterator[GenerationChunk]:
        async with contextlib.aclosing(self._route(request).stream(request)) as chunks:  # type: ignore[type-var]
            async for chunk in chunks:
                yield chunk

    async def health(self) -> None:
        await self.live.health()

    async def abort(self, request_id: str) -> None:
        await self.live.abort(request_id)

    async def aclose(self) -> None:
        await self.live.aclose()
        await self.refusing.aclose()
