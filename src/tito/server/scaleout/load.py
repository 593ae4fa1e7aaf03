"""`GET /load`: what a session pool places new sessions by (live sessions, turns in flight, readiness), cheaper
than rendering `/metrics`. Turns in flight are the turn gate's count (server.turns.turn_gate: every turn route of every
dialect, a streamed turn until its last event is sent).

Imports from tito: server.replies, server.state.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter
from fastapi.responses import Response

from tito.server.replies import json_response
from tito.server.state import ServerState


def load_routes(state: ServerState, is_ready: Callable[[], bool]) -> APIRouter:
    """`GET /load`: the session count, the turns in flight and readiness."""
    router = APIRouter()

    @router.get("/load")
    async def load() -> Response:
        body = {"sessions": len(state.registry), "turns_in_flight": state.gate.in_flight, "ready": is_ready()}
        return json_response(body)

    return router
