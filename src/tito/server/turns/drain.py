"""Weight-update drain: admin routes to pause new turns, report the turns in flight, wait until none are, and resume
with a new weight version.

An asynchronous RL trainer updates the engines' weights while agents run. Before an update it pauses tito
(`POST /admin/pause`, `reject`: new turns get 429 with `Retry-After`; `hold`: they wait), waits for the turns in
flight to end (`POST /admin/drain`), updates the engines, and resumes (`POST /admin/resume` with the new weight
version). The gate itself is server.turns.turn_gate; server.turn_lane puts it in front of every turn route. The
weight version given on resume is recorded on the turns whose engine reports none
(`GuardedEngine.declared_weight_version`); an engine that reports its own (SGLang, vLLM's generate endpoint) is
believed, every version it reported during a turn.

Imports from tito: server.errors, server.models, server.replies, server.state, server.turns.turn_gate.
"""

from __future__ import annotations

import math
from typing import Any, Literal, TypeVar

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tito.server.errors import BadRequestError, validation_error
from tito.server.models import RequestModel
from tito.server.replies import json_response, read_body
from tito.server.state import ServerState
from tito.server.turns.turn_gate import PauseMode

_Body = TypeVar("_Body", bound=BaseModel)


class PauseRequest(RequestModel):
    """`POST /admin/pause`."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    mode: Literal["reject", "hold"] = "reject"
    """`reject`: a new turn gets 429 with Retry-After; `hold`: it waits until resume."""
    retry_after: float = Field(default=1.0, gt=0)
    """Seconds a refused turn is told to wait (`reject`)."""


class ResumeRequest(RequestModel):
    """`POST /admin/resume`."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    weight_version: str | None = Field(default=None, min_length=1)
    """The engines' weight version from now on: recorded on turns whose engine reports none."""


def admin_routes(state: ServerState) -> APIRouter:
    """`POST /admin/pause`, `GET /admin/turns`, `POST /admin/drain?timeout=S`, `POST /admin/resume` (behind the
    server's API key, as every route)."""
    gate, engine, max_body_bytes = state.gate, state.engine, state.options.max_body_bytes
    router = APIRouter()

    def status() -> dict[str, Any]:
        return gate.status() | {"weight_version": engine.declared_weight_version}

    @router.post("/admin/pause")
    async def pause(request: Request) -> Response:
        asked = await _body(request, PauseRequest, max_body_bytes)
        gate.pause(PauseMode(asked.mode), asked.retry_after)
        return json_response(status())

    @router.get("/admin/turns")
    async def turns() -> Response:
        return json_response(status())

    @router.post("/admin/drain")
    async def drain(request: Request) -> Response:
        raw = request.query_params.get("timeout", "600")
        try:
            timeout = float(raw)
        except ValueError:
            raise BadRequestError(f"timeout={raw[:50]!r}: give the most seconds to wait, e.g. ?timeout=60") from None
        if not math.isfinite(timeout) or timeout < 0:
            raise BadRequestError(f"timeout={raw[:50]!r}: give a number of seconds >= 0")
        drained, waited = await gate.drain(timeout)
        return json_response(status() | {"drained": drained, "drain_seconds": waited}, 200 if drained else 504)

    @router.post("/admin/resume")
    async def resume(request: Request) -> Response:
        asked = await _body(request, ResumeRequest, max_body_bytes)
        if asked.weight_version is not None:
            engine.declared_weight_version = asked.weight_version
        paused = gate.resume()
        return json_response(status() | {"paused_for_seconds": paused})

    return router


async def _body(request: Request, model: type[_Body], max_body_bytes: int) -> _Body:
    body = await read_body(request, max_body_bytes)
    try:
        return model.model_validate_json(body) if body.strip() else model()
    except ValidationError as exc:
        raise validation_error(exc) from None
