"""What the in-test engine servers share: a deterministic "model", scripted failures, recorded requests.

The i-th sampled id of a prompt is `scripted_id(prompt, i)` with logprob `scripted_logprob(i)`, unless the test
scripts the ids. Servers honour max tokens and stop token ids (the matched one is kept), record every request
(path, headers, body), and fail on request: an error status with the engine's error body, a slow reply, a dropped
connection, a malformed body, or one of `FAULTS` (a `FaultPlan`: the next calls, or a seeded random share of them).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response


def scripted_id(prompt: list[int], position: int) -> int:
    return 1000 + (sum(prompt) * 31 + position * 7) % 5000


def scripted_logprob(position: int) -> float:
    return -(position + 1) / 8


def scripted_top_logprobs(token: int, position: int, count: int) -> list[tuple[int, float]]:
    """The `count` most likely ids at a position, best first: the sampled id, then ids above it, each less likely."""
    return [(token + rank, scripted_logprob(position) - rank / 4) for rank in range(count)]


@dataclass
class Behaviour:
    """What the next requests get; tests set fields, the `reset` fixture restores the defaults."""

    reply_ids: list[int] | None = None
    """The ids to 'sample' (cut by max tokens and stop ids); None: `scripted_id`."""
    token_delay: float = 0.0
    """Seconds before each streamed id (and before a whole non-streaming reply, times its length)."""
    status: int | None = None
    """Answer every generate call with this status and the engine's error body."""
    error_message: str = "Token id 999999 is out of vocabulary"
    drop_connection: bool = False
    """Close the connection mid-reply (after the headers, and after the first streamed event)."""
    malformed: bool = False
    """Reply 200 with a body that lacks the ids."""
    incremental: bool = False
    """SGLang `--incremental-streaming-output`: stream deltas instead of cumulative events."""
    weight_version: str = "default"
    weight_update: tuple[int, str] | None = None
    """(n, version): the weights change after the n-th sampled id of each reply, to `version` (a mid-reply update)."""
    usage_chunk: bool = True
    stream_error: str | None = None
    """Stream: after the first event, an in-stream error event with this message (a 200 stream cannot change status)."""
    """vLLM: send the final `usage` chunk when `stream_options.include_usage` asks for it."""


FAULTS = (
    "refused",  # nothing listens (tests.engines.faults.FaultSwitch sends the call to a dead port)
    "status_500",  # the engine's error body with status 500
    "not_found",  # 404 {"detail": "Not Found"}: the route is missing (an older server, a router)
    "malformed_json",  # 200 with a body (an SSE event) that is not JSON
    "missing_fields",  # 200 JSON without the ids
    "bad_ids",  # a sampled id outside the vocabulary
    "nan_logprobs",  # a NaN logprob: SGLang's orjson writes it as null, Python's json as a NaN literal (vLLM fake)
    "inf_logprobs",  # -1e39: valid JSON, -inf as a float32
    "unknown_finish",  # a finish reason neither engine documents ("cancelled")
    "slow",  # nothing until aborted (or the client leaves): past --engine-timeout
    "cut",  # the connection dropped mid-reply (a stream: after its first event)
    "endless",  # a stream that never finishes (events without a finish reason, until aborted); whole reply: slow
)
"""What a generate call can be made to suffer."""
ABORT_FAULTS = ("not_found", "status_500", "hang")
"""What the abort route can be made to do instead of aborting: 404 (a server without it), 500, never answer."""
HANG_LIMIT = 10.0
"""Seconds a `slow`/`endless`/`hang` fault waits at most (tests end sooner: an abort or the client leaving)."""


def weight_version_at(behaviour: Behaviour, count: int) -> str:
    """The version that sampled the `count`-th id (1-based) of a reply."""
    update = behaviour.weight_update
    return update[1] if update is not None and count > update[0] else behaviour.weight_version


def weight_version_spans(behaviour: Behaviour, count: int) -> list[dict[str, Any]]:
    """vLLM's `weight_versions` of a reply of `count` ids: one span per version, `[start, end)`."""
    update = behaviour.weight_update
    if update is None or count <= update[0]:
        return [{"version": behaviour.weight_version, "start": 0, "end": count}]
    return [
        {"version": behaviour.weight_version, "start": 0, "end": update[0]},
        {"version": update[1], "start": update[0], "end": count},
    ]


@dataclass
class FaultPlan:
    """Which generate calls get a fault: `fault` for the next `times` calls (None: every call), else with chance
    `rate` one of `kinds` drawn from `rng` (the soak). `injected` lists each fault served, in order."""

    fault: str | None = None
    times: int | None = None
    rate: float = 0.0
    rng: random.Random | None = None
    kinds: tuple[str, ...] = FAULTS
    injected: list[str] = field(default_factory=list)

    def draw(self) -> str | None:
        fault = None
        if self.fault is not None and (self.times is None or self.times > 0):
            fault = self.fault
            self.times = None if self.times is None else self.times - 1
        elif self.rng is not None and self.rng.random() < self.rate:
            fault = self.rng.choice(self.kinds)
        if fault is not None:
            self.injected.append(fault)
        return fault


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class FakeServer:
    """A running in-test engine server: its URL, what it received, how it behaves."""

    url: str = ""
    behaviour: Behaviour = field(default_factory=Behaviour)
    requests: list[RecordedRequest] = field(default_factory=list)
    aborted: set[str] = field(default_factory=set)
    name: str = ""
    plan: FaultPlan = field(default_factory=FaultPlan)
    abort_fault: str | None = None
    """One of `ABORT_FAULTS` for every abort call; None: aborts work."""
    assigned: dict[str, str | None] = field(default_factory=dict)
    """Faults drawn for a request id before it reached the server (by `FaultSwitch`, which serves `refused`)."""

    def reset(self) -> None:
        self.behaviour = Behaviour()
        self.requests.clear()
        self.aborted.clear()
        self.plan = FaultPlan()
        self.abort_fault = None
        self.assigned.clear()

    def fault_for(self, request_id: str) -> str | None:
        """The fault of this generate call: the one drawn for it already, else drawn now."""
        if request_id in self.assigned:
            return self.assigned.pop(request_id)
        return self.plan.draw()

    async def wait_until_aborted(self, request_id: str, disconnected: Callable[[], Any]) -> None:
        """Hold a call until it is aborted or its client leaves (bounded by HANG_LIMIT)."""
        deadline = time.monotonic() + HANG_LIMIT
        while not self.is_aborted(request_id) and time.monotonic() < deadline and not await disconnected():
            await asyncio.sleep(0.01)

    def sample(self, prompt: list[int], max_tokens: int, stop_ids: list[int]) -> tuple[list[int], str, int | None]:
        """(ids, finish type, matched stop id) as the engine would sample them."""
        script = self.behaviour.reply_ids
        ids: list[int] = []
        for position in range(max_tokens):
            if script is not None and position >= len(script):
                return ids, "stop", None  # the script ended: EOS
            token = script[position] if script is not None else scripted_id(prompt, position)
            ids.append(token)
            if token in stop_ids:
                return ids, "stop", token
        return ids, "length", None

    def is_aborted(self, rid: str) -> bool:
        return any(rid.startswith(prefix) for prefix in self.aborted)


class DropConnection(Response):
    """Send the status line and headers, then fail: uvicorn closes the connection without a body."""

    def __init__(self) -> None:
        super().__init__(status_code=200, media_type="application/json")

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"100")]})
        raise ConnectionResetError("in-test server drops the connection")


async def abort_fault(server: FakeServer, request: Any) -> Response | None:
    """The abort route's reply under `server.abort_fault` (None: abort as asked)."""
    if server.abort_fault == "not_found":
        return JSONResponse({"detail": "Not Found"}, status_code=404)
    if server.abort_fault == "status_500":
        return JSONResponse({"error": {"message": "injected fault: abort failed"}}, status_code=500)
    if server.abort_fault == "hang":
        await server.wait_until_aborted("never-aborted", request.is_disconnected)
        return Response(status_code=200)
    return None


def missing_release_route(server: FakeServer) -> Callable[[Request], Awaitable[Response]]:
    """`POST /finish_session` as an engine (which has no such route) answers it: 404, recorded."""

    async def finish_session(request: Request) -> Response:
        server.requests.append(RecordedRequest("/finish_session", dict(request.headers), dict(request.query_params)))
        return JSONResponse({"detail": "Not Found"}, status_code=404)

    return finish_session
