"""The replies and the request body every route shares: JSON, an error (not retried by the SDKs unless 429), and
the body read under the server's size limit.

Imports from tito: errors, server.errors, server.metrics, trajectory.codec.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from tito.errors import TitoError
from tito.server.errors import BodyTooLargeError, ClientDisconnectedError, error_headers
from tito.server.metrics import ServerMetrics
from tito.trajectory.codec import json_bytes


def json_response(body: Any, status: int = 200) -> Response:
    """A JSON reply; one holding a value stored before requests were range-checked is written all the same."""
    return Response(json_bytes(body), status_code=status, media_type="application/json")


def error_response(body: Any, status: int) -> Response:
    """An error reply; a 4xx other than 429 tells the openai SDK not to retry it (a retry cannot succeed, and a
    retried 409 must not be mistaken for a new turn)."""
    response = json_response(body, status)
    if 400 <= status < 500 and status != 429:
        response.headers["x-should-retry"] = "false"
    return response


ErrorShape = Callable[[Exception], tuple[dict[str, Any], int]]
"""A dialect's error body and status for a failure (server.errors.openai_error, the dialects' `error_body`)."""


def error_reply(exc: Exception, shape: ErrorShape, metrics: ServerMetrics) -> Response:
    """The reply to a route's failure in its dialect's `shape`, counted; `Retry-After` when the client should
    retry later (e.g. an engine that is down)."""
    if isinstance(exc, TitoError):
        metrics.count_error(exc)
    else:
        metrics.errors.labels("InternalError").inc()
    body, status = shape(exc)
    response = error_response(body, status)
    if isinstance(exc, TitoError):
        response.headers.update(error_headers(exc))
    return response


def header_values(request: Request) -> dict[str, str]:
    """The request's headers by name, a repeated one's first value (what `request.headers.get` gives): read in one
    pass for a turn's several lookups (its retry mark, its lineage), where each `request.headers.get` scans them
    all (the SDKs send ~15)."""
    return {name.decode("latin-1"): value.decode("latin-1") for name, value in reversed(request.scope["headers"])}


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused (413) past `limit` bytes: before it is read when the length is declared, else
    (chunked) as soon as what arrived passes the limit, never buffering more. A body cut short (the client left, or
    its framing was malformed and the HTTP server already answered 400) is the client's protocol error, not tito's.
    Read from the ASGI messages themselves (no `request.stream()` generator to pass each piece on)."""
    for name, declared in request.scope["headers"]:
        if name == b"content-length":
            if declared.isdigit() and int(declared) > limit:
                raise BodyTooLargeError(
                    f"the request body is {declared.decode()} bytes; this server accepts at most {limit}"
                )
            break
    chunks: list[bytes] = []  # joined once at the end: a body that arrives whole (the usual case) is never copied
    size = 0
    receive = request.receive
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnectedError(
                f"the request body ended after {size} bytes: the client left, or its framing (chunk sizes, "
                "Content-Length) was malformed"
            )
        chunk = message.get("body", b"")
        if chunk:
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise BodyTooLargeError(f"the request body is over {limit} bytes, the most this server accepts")
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)
