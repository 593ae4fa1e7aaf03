"""The turn routes as plain ASGI: a POST on a session's chat completions, Messages or Responses route runs its
endpoint straight from the app's middlewares, through the turn gate, without FastAPI's router, its dependency
resolution or its exception middlewares.

A turn is the hot path (issue 34: a few milliseconds of tito's CPU each, to be brought under one): FastAPI's layers
between the last middleware and the endpoint cost about 0.4 ms of it (benchmarks/turn_cpu.py). The lane is the
innermost middleware, so the access log, the API key and scale-out's ownership check still run first; the routes
stay registered on the app for the OpenAPI contract, and every other route (and any other method) goes through
FastAPI as before.

Every turn passes `TurnGate.turn()` for the whole of its reply (a stream until its last event); a refusal while
paused is answered in the route's dialect, with `Retry-After` and `retry-after-ms`. An error the endpoint raises is
answered in the route's dialect too (chat completions' endpoint leaves that to the app's error handlers, which this
lane does not pass through).

Imports from tito: server.dialects, server.errors, server.metrics, server.replies, server.turns.turn_gate.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping

from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from tito.server.dialects import anthropic, responses
from tito.server.errors import PausedError, openai_error, retry_headers
from tito.server.metrics import ServerMetrics
from tito.server.replies import ErrorShape, error_reply, error_response
from tito.server.turns.turn_gate import TurnGate

TURN_ROUTE = re.compile(r"^/sessions/([^/]+)/v1/(chat/completions|messages|responses)$")
"""The routes that run a turn (Anthropic's count_tokens does not): the session id and the dialect's route."""
SHAPES: Mapping[str, ErrorShape] = {
    "chat/completions": openai_error,
    "messages": anthropic.error_body,
    "responses": responses.error_body,
}
"""Each turn route's error shape (its dialect's)."""

Endpoint = Callable[[str, Request], Awaitable[Response]]
"""A turn route's endpoint: the session id and the request, to the reply."""


def turn_endpoints(routes: list[BaseRoute]) -> dict[str, Endpoint]:
    """The endpoints of the app's turn routes, by route (`chat/completions`, `messages`, `responses`)."""
    endpoints: dict[str, Endpoint] = {}
    for route in routes:
        if isinstance(route, APIRoute) and "POST" in (route.methods or ()):
            for suffix in SHAPES:
                if route.path == f"/sessions/{{session_id}}/v1/{suffix}":
                    endpoints[suffix] = route.endpoint
    missing = set(SHAPES) - set(endpoints)
    if missing:
        raise RuntimeError(f"the app has no POST route for {sorted(missing)}")
    return endpoints


class TurnLane:
    """The innermost middleware: turn routes to their endpoints (see the module docstring), the rest to `app`."""

    def __init__(self, app: ASGIApp, gate: TurnGate, metrics: ServerMetrics, endpoints: Mapping[str, Endpoint]) -> None:
        self.app = app
        self.gate = gate
        self.metrics = metrics
        self.endpoints = endpoints

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        match = TURN_ROUTE.match(scope["path"]) if scope["type"] == "http" and scope["method"] == "POST" else None
        if match is None:
            await self.app(scope, receive, send)
            return
        session_id, route = match.groups()
        shape = SHAPES[route]
        try:
            async with self.gate.turn():
                try:
                    reply = await self.endpoints[route](session_id, Request(scope, receive))
                except Exception as exc:
                    reply = error_reply(exc, shape, self.metrics)
                await reply(scope, receive, send)
        except PausedError as exc:
            self.metrics.count_error(exc)
            body, status = shape(exc)
            refusal = error_response(body, status)
            refusal.headers.update(retry_headers(exc))
            await refusal(scope, receive, send)
