"""The FastAPI app: each room's routes included, the middlewares (access log, inspector page, API key, ownership,
and innermost the turn lane: the turn routes as plain ASGI behind the turn gate), error bodies, the TTL sweeper and
the journal's lifetime.

Imports from tito: errors, server (its modules).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from tito.errors import TitoError
from tito.server.access_log import AccessLogMiddleware, DirectLines
from tito.server.dialects.routes import dialect_routes
from tito.server.discovery import discovery_routes
from tito.server.errors import BadRequestError, UnauthorizedError, error_body, openai_error
from tito.server.inspection.read_api import LiveSessions, read_routes
from tito.server.inspection.ui import InspectorPageMiddleware
from tito.server.metrics import ServerMetrics
from tito.server.openapi import tito_openapi
from tito.server.probes import probe_routes
from tito.server.replies import error_reply, error_response
from tito.server.scaleout.load import load_routes
from tito.server.scaleout.ownership import OwnershipMiddleware, SharedJournalOwner
from tito.server.sessions.journaling import open_server_journal
from tito.server.sessions.routes import session_routes
from tito.server.state import ServerState
from tito.server.turn_lane import TurnLane, turn_endpoints
from tito.server.turns.chat_route import chat_routes
from tito.server.turns.drain import admin_routes

logger = logging.getLogger(__name__)


class ApiKeyMiddleware:
    """Every route needs `Authorization: Bearer <key>` (pure ASGI: no per-request dependency resolution)."""

    def __init__(self, app: ASGIApp, api_key: str, metrics: ServerMetrics) -> None:
        self.app = app
        self.expected = f"Bearer {api_key}".encode()
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not secrets.compare_digest(given, self.expected):
                error = UnauthorizedError("missing or wrong API key: send 'Authorization: Bearer <key>'")
                self.metrics.errors.labels(type(error).__name__).inc()
                await error_response(error_body(error), error.http_status)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def create_app(state: ServerState, access_lines: DirectLines | None = None) -> FastAPI:
    """The app; `access_lines`: the access log written straight to a file descriptor, not through `logging`."""
    options = state.options
    registry = state.registry
    metrics = state.metrics
    owner = SharedJournalOwner(state) if options.journal and options.journal_shared else None

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        journal = None
        if options.journal and owner is None:
            journal = open_server_journal(registry, options.journal, options.journal_fsync)
        if owner is not None:
            await owner.start()
        sweeper = asyncio.create_task(_sweep_expired(state))
        yield
        sweeper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sweeper
        if journal is not None:
            journal.close()
        if owner is not None:
            owner.close()

    app = FastAPI(title="tito", lifespan=lifespan)
    app.state.tito = state
    app.state.ownership = owner
    _add_routes(app, state, owner)
    # Innermost first: the turn lane runs the turn routes' endpoints straight from the middlewares (server.turn_lane).
    app.add_middleware(TurnLane, gate=state.gate, metrics=metrics, endpoints=turn_endpoints(app.router.routes))
    if owner is not None:
        app.add_middleware(OwnershipMiddleware, owner=owner)
    if options.api_key is not None:
        app.add_middleware(ApiKeyMiddleware, api_key=options.api_key, metrics=metrics)
    app.add_middleware(InspectorPageMiddleware)  # outside the key check: the page's static shell (no data) needs no key
    app.add_middleware(AccessLogMiddleware, direct=access_lines)  # outermost: every request is logged, refused ones too

    @app.exception_handler(TitoError)
    async def tito_error(request: Request, exc: TitoError) -> Response:
        return error_reply(exc, openai_error, metrics)

    @app.exception_handler(RequestValidationError)
    async def request_validation_error(request: Request, exc: RequestValidationError) -> Response:
        error = BadRequestError("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5]))
        return await tito_error(request, error)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        metrics.errors.labels("HTTPException").inc()
        return error_response({"error": {"type": "HTTPException", "message": str(exc.detail)}}, exc.status_code)

    @app.exception_handler(Exception)
    async def unexpected_error(request: Request, exc: Exception) -> Response:
        return error_reply(exc, openai_error, metrics)

    app.openapi = lambda: tito_openapi(app)  # type: ignore[method-assign]  # the bodies the routes read themselves
    return app


def _add_routes(app: FastAPI, state: ServerState, owner: SharedJournalOwner | None) -> None:
    """The rooms' routers, in matching order. Their routes join the app's own list (FastAPI 0.16x's include_router
    keeps an included router whole and lazy, and the OpenAPI schema and its tests read `app.routes`)."""
    for router in (
        probe_routes(state, owner),  # /health, /ready, /metrics
        load_routes(state, lambda: owner is None or owner.serving),  # GET /load: what a session pool places by
        discovery_routes(state),  # /v1/models (also per session), hints for session-less paths and GET /samples
        session_routes(state),  # POST /sessions, DELETE /sessions/{id}, POST /sessions/{id}/samples
        read_routes(LiveSessions(state)),  # GET /sessions, /sessions/{id}, /sessions/{id}/turns/{node}
        chat_routes(state),  # OpenAI chat completions
        dialect_routes(state),  # Anthropic Messages and Responses: edges onto the same turn steps
        admin_routes(state),  # weight-update drain: pause, turns in flight, drain, resume
    ):
        app.router.routes.extend(router.routes)


async def _sweep_expired(state: ServerState) -> None:
    """Evict idle sessions every second (a request on an expired session also finds it gone); a failure (e.g. a
    journal write) is logged and the sweep goes on."""
    while True:
        await asyncio.sleep(1.0)
        try:
            await state.registry.evict_expired()
        except Exception:
            logger.exception("evicting expired sessions failed; retrying in 1 s")
        state.metrics.live_sessions.set(len(state.registry))
