"""Routes that tell a client where to go: the model list (server-wide and per session, so `client.models.list()`
works on a session's base URL), a 404 naming the way in for the OpenAI paths without a session, and a 405 on
`GET /samples` saying to POST.

Imports from tito: errors, server (its modules).
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import Response

from tito.errors import TitoError
from tito.server.errors import error_body
from tito.server.models import SamplesRequest
from tito.server.state import ServerState

SESSIONLESS_OPENAI_PATHS = ("/v1/chat/completions", "/v1/messages", "/v1/responses")
"""Where an agent pointed at the server root (not at a session) sends its turns."""


class NoSessionInPathError(TitoError):
    """An OpenAI-style path without a session: tito records turns per session."""

    http_status = 404


class UsePostError(TitoError):
    http_status = 405


def models_body(model_name: str) -> dict[str, Any]:
    """OpenAI's model list: the one model this server serves."""
    return {"object": "list", "data": [{"id": model_name, "object": "model", "created": 0, "owned_by": "tito"}]}


def discovery_routes(state: ServerState) -> APIRouter:
    router = APIRouter()

    @router.get("/v1/models")
    async def models() -> Response:
        return Response(orjson.dumps(models_body(state.model_name)), media_type="application/json")

    @router.get("/sessions/{session_id}/v1/models")
    async def session_models(session_id: str) -> Response:
        state.registry.get(session_id)  # an unknown session is a 404, a deleted one a 410
        return await models()

    async def no_session(request: Request) -> Response:
        raise NoSessionInPathError(
            f"{request.url.path} needs a session: create a session with POST /sessions, then use "
            f"/sessions/{{id}}/v1 as the client's base URL (e.g. POST /sessions/{{id}}{request.url.path})"
        )

    for path in SESSIONLESS_OPENAI_PATHS:
        router.add_api_route(path, no_session, methods=["GET", "POST"], include_in_schema=False)

    @router.get("/sessions/{session_id}/samples", include_in_schema=False)
    async def samples_by_get(session_id: str) -> Response:
        fields = ", ".join(SamplesRequest.model_fields)
        error = UsePostError(
            f"samples are taken with POST /sessions/{session_id}/samples (JSON body, every field optional: {fields})"
        )
        headers = {"allow": "POST", "x-should-retry": "false"}
        body = orjson.dumps(error_body(error))
        return Response(body, status_code=405, media_type="application/json", headers=headers)

    return router
