"""The session routes: `POST /sessions` (a session's config, each limit at most the server's), `DELETE
/sessions/{id}`, and `POST /sessions/{id}/samples` (samples in the trainer's format; the reward and format options
journaled with them).

Imports from tito: server.errors, server.models, server.replies, server.sessions, server.state, trajectory.events.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import ValidationError

from tito.server.errors import validation_error
from tito.server.models import SamplesRequest, SessionRequest
from tito.server.replies import json_response, read_body
from tito.server.sessions.samples import asked_json, build_samples, samples_format, samples_response, session_reward
from tito.server.state import ServerState
from tito.trajectory.events import SessionConfig, TrajectoryKind

SESSION_ID_HEADER = "x-tito-session-id"
"""`POST /sessions`: the id the router minted and hashed this request by (nginx `$request_id`), so the session's
later requests, hashed by the same id, reach the process that created it."""


def session_routes(state: ServerState) -> APIRouter:
    options, registry, metrics = state.options, state.registry, state.metrics
    router = APIRouter()

    @router.post("/sessions")
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

    @router.delete("/sessions/{session_id}")
    async def delete_session(session_id: str) -> Response:
        await registry.delete(session_id)
        metrics.live_sessions.set(len(registry))
        return Response(status_code=204)

    @router.post("/sessions/{session_id}/samples")
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

    return router


def _at_most(asked: float | None, limit: float | None) -> Any:
    """A session's own limit, never above the server's (the operator's bound holds for every client)."""
    if asked is None or limit is None:
        return limit if asked is None else asked
    return min(asked, limit)
