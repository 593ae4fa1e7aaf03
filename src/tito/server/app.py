"""The FastAPI app: routes, API key, body limit, error bodies, the TTL sweeper and the journal's lifetime.

Imports from tito: errors, trajectory.codec, trajectory.events, trajectory.samples, server (its modules).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from tito.errors import TitoError
from tito.server.access_log import AccessLogMiddleware
from tito.server.completions import (
    complete_turn,
    prepare_turn,
    read_chat_body,
    reply_body,
)
from tito.server.dialects.routes import register_dialect_routes
from tito.server.discovery import add_discovery_routes
from tito.server.drain import TurnGateMiddleware, add_admin_routes
from tito.server.errors import BadRequestError, UnauthorizedError, error_body, error_headers, validation_error
from tito.server.journaling import open_server_journal
from tito.server.lineage import lineage_of
from tito.server.load import add_load_route
from tito.server.logprobs import choice_logprobs
from tito.server.metrics import ServerMetrics
from tito.server.models import SamplesRequest, SessionRequest
from tito.server.openapi import tito_openapi
from tito.server.ownership import SESSION_ID_HEADER, OwnershipMiddleware, SharedJournalOwner
from tito.server.read_api import LiveSessions, add_read_routes
from tito.server.replies import error_response, json_response, read_body
from tito.server.retries import request_key
from tito.server.samples import asked_json, build_samples, samples_format, samples_response, session_reward
from tito.server.state import ServerState
from tito.server.streaming import streamed_reply
from tito.server.ui import InspectorPageMiddleware
from tito.trajectory.events import SessionConfig, TrajectoryKind, TurnCommitted

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


def create_app(state: ServerState) -> FastAPI:
    options = state.options
    registry = state.registry
    metrics = state.metrics
    owner = SharedJournalOwner(state) if options.journal and options.journal_shared else None
    tokenizer = state.tokenizers.tokenizer

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
    app.add_middleware(TurnGateMiddleware, gate=state.gate)  # innermost: a turn is counted until its reply is sent
    if owner is not None:
        app.add_middleware(OwnershipMiddleware, owner=owner)
    if options.api_key is not None:
        app.add_middleware(ApiKeyMiddleware, api_key=options.api_key, metrics=metrics)
    app.add_middleware(InspectorPageMiddleware)  # outside the key check: the page's static shell (no data) needs no key
    app.add_middleware(AccessLogMiddleware)  # outermost: every request is logged, refused ones too

    @app.exception_handler(TitoError)
    async def tito_error(request: Request, exc: TitoError) -> Response:
        metrics.count_error(exc)
        response = error_response(error_body(exc), exc.http_status)
        response.headers.update(error_headers(exc))
        return response

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
        metrics.errors.labels("InternalError").inc()
        message = f"internal error: {type(exc).__name__}: {exc}"
        return error_response({"error": {"type": "InternalError", "message": message}}, 500)

    @app.get("/health")
    async def health() -> Response:
        if owner is not None and owner.lease_lost:
            return json_response({"status": "lease lost: this process serves no sessions; restart it"}, 503)
        await state.engine.health()
        return json_response({"status": "ok", "sessions": len(registry)})

    @app.get("/ready")
    async def ready() -> Response:
        """For a load balancer: 503 while this process replays journals on start or after losing its lease."""
        if owner is not None and not owner.serving:
            return json_response({"ready": False, "lease_lost": owner.lease_lost}, 503)
        return json_response({"ready": True})

    add_load_route(app, state, lambda: owner is None or owner.serving)  # GET /load: what a session pool places by

    @app.get("/metrics")
    async def prometheus() -> Response:
        metrics.live_sessions.set(len(registry))
        return Response(metrics.render(), media_type="text/plain; version=0.0.4")

    add_discovery_routes(app, state)  # /v1/models (also per session), hints for session-less paths and GET /samples

    @app.post("/sessions")
    async def create_session(request: Request) -> Response:
        body = await read_body(request, options.max_body_bytes)
        try:
            asked = SessionRequest.model_validate_json(body) if body.strip() else SessionRequest()
        except ValidationError as exc:
            raise validation_error(exc) from None
        roles = tuple(asked.allowed_append_roles) if asked.allowed_append_roles is not None else None
        strict = asked.strict_append_only
        config = SessionConfig(
            trajectory=TrajectoryKind(asked.trajectory) if asked.trajectory else options.trajectory,
            chat_template_kwargs=asked.chat_template_kwargs or {},
            allowed_append_roles=roles,
            max_nodes=_at_most(asked.max_nodes, options.max_nodes),
            strict_append_only=options.strict_append_only if strict is None else strict,
            matcher=asked.matcher or options.matcher,
            sample_picker=options.sample_picker,
            sample_postprocessor=options.sample_postprocessor,
            ttl_seconds=_at_most(asked.ttl_seconds, options.session_ttl),
            group_id=asked.group_id,
            hosted_tools=asked.hosted_tools or options.hosted_tools,
        )
        state.tokenizers.get(config.chat_template_kwargs, None, config.allowed_append_roles)  # refuse bad config now
        session = await registry.create(config, request.headers.get(SESSION_ID_HEADER))
        metrics.live_sessions.set(len(registry))
        return json_response({"session_id": session.session_id})

    add_read_routes(app, LiveSessions(state))  # GET /sessions, /sessions/{id}, /sessions/{id}/turns/{node}

    @app.delete("/sessions/{session_id}")
    async def delete_session(session_id: str) -> Response:
        await registry.delete(session_id)
        metrics.live_sessions.set(len(registry))
        return Response(status_code=204)

    @app.post("/sessions/{session_id}/v1/chat/completions")
    async def chat_completions(session_id: str, request: Request) -> Response:
        started = time.monotonic()
        session = registry.get(session_id)
        body = await read_body(request, options.max_body_bytes)
        read = read_chat_body(session, body)
        chat = read.request
        key = request_key(body, request.headers, read.digest)
        lineage = lineage_of(request.headers, chat.messages)
        prepared = await prepare_turn(state, session, chat, key.fingerprint, key.is_retry, lineage)
        if chat.stream:
            return streamed_reply(state, chat, prepared, request.receive, started)
        if isinstance(prepared, TurnCommitted):
            stored = choice_logprobs(chat, tokenizer, prepared.output_ids, prepared.output_logprobs)
            return json_response(reply_body(prepared, state.reply_model(chat.model), stored))
        completed = await complete_turn(state, prepared, request.receive, started)
        final, generation = completed.turn, completed.generation
        tops = generation.top_logprobs if final.output_ids == generation.output_ids else ()
        logprobs = choice_logprobs(chat, tokenizer, final.output_ids, final.output_logprobs, tops)
        return json_response(reply_body(final, state.reply_model(chat.model), logprobs))

    register_dialect_routes(app, state)  # Anthropic Messages and Responses: edges onto the same turn steps
    add_admin_routes(app, state)  # weight-update drain: pause, turns in flight, drain, resume

    @app.post("/sessions/{session_id}/samples")
    async def samples(session_id: str, request: Request) -> Response:
        session = registry.get(session_id)
        body = await read_body(request, options.max_body_bytes)
        try:
            asked = SamplesRequest.model_validate_json(body) if body.strip() else SamplesRequest()
        except ValidationError as exc:
            raise validation_error(exc) from None
        wanted = samples_format(asked.format, request.query_params.get("format"), request.headers.get("accept", ""))
        engine = state.engine.info
        server_metadata = {"engine": engine.name, "logprob_semantics": engine.logprob_semantics.value}
        built = build_samples(session_id, session.trajectory, asked, server_metadata, session.config.group_id)
        await registry.samples_taken(session, session_reward(asked, built), asked_json(asked))
        if asked.end:
            registry.on_session_end(session_id)
        return samples_response(session_id, built, wanted)

    app.openapi = lambda: tito_openapi(app)  # type: ignore[method-assign]  # the bodies the routes read themselves
    return app


def _at_most(asked: float | None, limit: float | None) -> Any:
    """A session's own limit, never above the server's (the operator's bound holds for every client)."""
    if asked is None or limit is None:
        return limit if asked is None else asked
    return min(asked, limit)


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
