"""`GET /load`: what a session pool places new sessions by (live sessions, turns in flight, readiness), cheaper
than rendering `/metrics`. Turns in flight are counted by an ASGI middleware around the turn routes of every dialect
(a streamed turn counts until its last event is sent).

Imports from tito: server.replies, server.state.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI
from fastapi.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from tito.server.replies import json_response
from tito.server.state import ServerState

TURN_PATH_ENDS = ("/v1/chat/completions", "/v1/messages", "/v1/responses")


class TurnCounter:
    def __init__(self) -> None:
        self.in_flight = 0


class TurnsInFlightMiddleware:
    """Counts requests on a session's turn routes while the app handles them (pure ASGI: a suffix test and two
    additions per request)."""

    def __init__(self, app: ASGIApp, counter: TurnCounter) -> None:
        self.app = app
        self.counter = counter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].endswith(TURN_PATH_ENDS):
            await self.app(scope, receive, send)
            return
        self.counter.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.counter.in_flight -= 1


def add_load_route(app: FastAPI, state: ServerState, is_ready: Callable[[], bool]) -> None:
    """`GET /load` and the middleware counting the turns it reports."""
    counter = TurnCounter()
    app.add_middleware(TurnsInFlightMiddleware, counter=counter)

    @app.get("/load")
    async def load() -> Response:
        body = {"sessions": len(state.registry), "turns_in_flight": counter.in_flight, "ready": is_ready()}
        return json_response(body)
