"""The OpenAPI schema (`/openapi.json`): every route's request body, query and path parameters, and every status it
can answer with the error body's shape (Anthropic's on its routes, OpenAI's elsewhere).

The routes read their bodies themselves (the size limit, the fingerprint of the raw bytes), so FastAPI cannot see
their models; `ROUTES` names them, with the statuses each route answers besides 200, and `tito_openapi` writes them
into the schema FastAPI generates. tests/server/test_openapi.py checks the table against the app's routes.

Imports from tito: server.dialects.anthropic, server.dialects.responses, server.turns.drain, server.models.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel

from tito.server.dialects.anthropic import AnthropicRequest
from tito.server.dialects.responses import ResponsesRequest
from tito.server.models import ChatCompletionRequest, SamplesRequest, SessionRequest
from tito.server.turns.drain import PauseRequest, ResumeRequest

ERROR_BODY = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["type", "message"],
            "properties": {
                "type": {"type": "string"},
                "message": {"type": "string"},
                "code": {"type": ["string", "null"]},
                "engine": {"type": "string"},
                "param": {"type": ["string", "null"]},
            },
        }
    },
}
"""OpenAI's error shape (`tito.server.errors.error_body`; the Responses edge adds `param` and `code`)."""
ANTHROPIC_ERROR_BODY = {
    "type": "object",
    "required": ["type", "error"],
    "properties": {
        "type": {"const": "error"},
        "error": {
            "type": "object",
            "required": ["type", "message"],
            "properties": {"type": {"type": "string"}, "message": {"type": "string"}},
        },
    },
}
"""Anthropic's error shape (`tito.server.dialects.anthropic.error_body`)."""
STATUS_TEXT = {
    204: "no content",
    400: "a request tito cannot use: the message names the field and what it must be",
    401: "missing or wrong API key (tito serve --api-key)",
    404: "no such session, node or route",
    405: "method not allowed",
    409: "a conflict: the turn was cut by the length limit, the session moved on, or the session id is taken",
    410: "the session was deleted or expired",
    413: "the request body is over the server's limit (--max-body-bytes)",
    422: "the session's samples cannot be assembled (no committed turn, a sample hook broke its contract)",
    429: "the engine is overloaded: retry after Retry-After",
    499: "the client left, or the request body's framing was malformed",
    502: "the inference engine failed",
    503: "retry after Retry-After: the engine is unavailable, the server at capacity or replaying its journal",
    504: "the inference engine did not answer in time",
}
READ = (401, 404, 410, 503)
TURN = (400, 401, 404, 409, 410, 413, 429, 499, 502, 503, 504)


@dataclass(frozen=True)
class Operation:
    """What the schema says of one route beyond what FastAPI sees: its body model, its statuses besides 200."""

    statuses: tuple[int, ...]
    body: type[BaseModel] | None = None
    body_required: bool = True
    anthropic: bool = False
    """Errors in Anthropic's shape (all but 401, which the API-key check answers in OpenAI's)."""
    query: tuple[dict[str, Any], ...] = ()
    replies: tuple[str, ...] = ("application/json",)
    """The media types of its 200."""


JSON_OR_STREAM = ("application/json", "text/event-stream")
"""A turn's reply: JSON, or server-sent events with `stream: true`."""
FORMAT_QUERY = {
    "name": "format",
    "in": "query",
    "required": False,
    "schema": {"type": "string"},
    "description": "json (default), safetensors, or a trainer's format (tito.trajectory.exports.PROJECTIONS)",
}
DRAIN_TIMEOUT_QUERY = {
    "name": "timeout",
    "in": "query",
    "required": False,
    "schema": {"type": "number", "minimum": 0},
    "description": "the most seconds to wait for the turns in flight (default 600); 504 when they are not done by then",
}
ROUTES: dict[tuple[str, str], Operation] = {
    ("GET", "/health"): Operation((401, 502, 503, 504)),
    ("GET", "/ready"): Operation((401, 503)),
    ("GET", "/metrics"): Operation((401,), replies=("text/plain",)),
    ("GET", "/load"): Operation((401,)),
    ("POST", "/admin/pause"): Operation((400, 401, 413, 499), PauseRequest, body_required=False),
    ("GET", "/admin/turns"): Operation((401,)),
    ("POST", "/admin/drain"): Operation((400, 401, 504), query=(DRAIN_TIMEOUT_QUERY,)),
    ("POST", "/admin/resume"): Operation((400, 401, 413, 499), ResumeRequest, body_required=False),
    ("GET", "/v1/models"): Operation((401,)),
    ("GET", "/sessions/{session_id}/v1/models"): Operation(READ),
    ("POST", "/sessions"): Operation((400, 401, 409, 413, 499, 503), SessionRequest, body_required=False),
    ("GET", "/sessions"): Operation((401, 503)),
    ("GET", "/sessions/{session_id}"): Operation((400, *READ)),
    ("GET", "/sessions/{session_id}/turns/{node}"): Operation((400, *READ)),
    ("DELETE", "/sessions/{session_id}"): Operation((204, *READ)),
    ("POST", "/sessions/{session_id}/v1/chat/completions"): Operation(
        TURN, ChatCompletionRequest, replies=JSON_OR_STREAM
    ),
    ("POST", "/sessions/{session_id}/v1/messages"): Operation(
        TURN, AnthropicRequest, anthropic=True, replies=JSON_OR_STREAM
    ),
    ("POST", "/sessions/{session_id}/v1/messages/count_tokens"): Operation(TURN, AnthropicRequest, anthropic=True),
    ("POST", "/sessions/{session_id}/v1/responses"): Operation(TURN, ResponsesRequest, replies=JSON_OR_STREAM),
    ("POST", "/sessions/{session_id}/samples"): Operation(
        (400, 401, 404, 410, 413, 422, 499, 503),
        SamplesRequest,
        body_required=False,
        query=(FORMAT_QUERY,),
        replies=("application/json", "application/vnd.safetensors"),
    ),
}


def tito_openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's schema of `app` with `ROUTES` written in (built once, then cached on the app as FastAPI does)."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    schema = get_openapi(title=app.title, version=app.version, routes=app.routes)
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components["Error"] = ERROR_BODY
    components["AnthropicError"] = ANTHROPIC_ERROR_BODY
    for (method, path), operation in ROUTES.items():
        described = schema["paths"][path][method.lower()]
        _document(described, operation, components)
    app.openapi_schema = schema
    return schema


def _document(described: dict[str, Any], operation: Operation, components: dict[str, Any]) -> None:
    if operation.body is not None:
        model = operation.body
        body_schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        components.update(body_schema.pop("$defs", {}))
        components[model.__name__] = body_schema
        described["requestBody"] = {
            "required": operation.body_required,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}},
        }
    for parameter in described.get("parameters", ()):
        if parameter["name"] == "node":
            parameter["schema"] = {"type": "string", "pattern": "^[0-9]+$"}
            parameter["description"] = "a node id: ASCII decimal digits (anything else is a 400)"
    described["parameters"] = [*described.get("parameters", ()), *operation.query]
    if not described["parameters"]:
        del described["parameters"]
    responses = described["responses"]
    responses.pop("422", None)  # FastAPI's validation reply: tito answers 400 (a 422 below is the samples' own)
    if 204 in operation.statuses:
        responses.pop("200", None)
    else:
        responses["200"]["content"] = {media_type: {"schema": {}} for media_type in operation.replies}
    for status in operation.statuses:
        if status == 204:
            responses["204"] = {"description": STATUS_TEXT[204]}
            continue
        shape = "AnthropicError" if operation.anthropic and status != 401 else "Error"
        responses[str(status)] = {
            "description": STATUS_TEXT[status],
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{shape}"}}},
        }
