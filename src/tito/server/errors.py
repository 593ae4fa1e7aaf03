"""The server's own errors and the one place any error becomes an HTTP body `{"error": {"type", "message"}}`.

Imports nothing from tito but errors.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from tito.errors import EngineError, TitoError


class BadRequestError(TitoError):
    """A request body tito cannot use (wrong type, unsupported option): 400 naming the field."""

    http_status = 400


class UnauthorizedError(TitoError):
    http_status = 401


class SessionNotFoundError(TitoError):
    http_status = 404


class SessionGoneError(TitoError):
    """The session existed and was deleted or expired."""

    http_status = 410


class ClientDisconnectedError(TitoError):
    """The client went away during its turn; nothing was recorded (499, nginx's code: no one reads it)."""

    http_status = 499


class BodyTooLargeError(TitoError):
    http_status = 413


class AtCapacityError(TitoError):
    """The server holds its maximum number of live sessions."""

    http_status = 503


class SessionIdTakenError(TitoError):
    """`POST /sessions` named (through the router's `X-Tito-Session-Id`) an id that is or was in use."""

    http_status = 409


class RetryableError(TitoError):
    """A 503 the client should retry after `retry_after_s` (sent as `Retry-After` and `retry-after-ms`)."""

    http_status = 503

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class TakeoverPendingError(RetryableError):
    """The session belongs to a process that died; this one is taking it over from its journal."""


class NotReadyError(RetryableError):
    """This process is still replaying journals on start (`/ready` answers 503 meanwhile)."""


class LeaseLostError(RetryableError):
    """This process lost its lease (fenced, or a renewal overdue): another process may own its sessions now."""


class SessionHeldElsewhereError(RetryableError):
    """A live process took the session over; the router sent it here (after a restart, before a hand-back)."""


def validation_error(exc: ValidationError, where: str = "body") -> BadRequestError:
    """A pydantic error as a 400 that names each wrong field and what it must be."""
    problems = [
        f"{_location(error['loc'])}: {error['msg'].removeprefix('Value error, ')}" for error in exc.errors()[:5]
    ]
    return BadRequestError(f"invalid request {where}: " + "; ".join(problems))


def _location(loc: Sequence[Any]) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "body"


def error_body(exc: TitoError) -> dict[str, Any]:
    """OpenAI's error shape; an engine's error also names the engine and the kind of fault (`code`)."""
    if isinstance(exc, EngineError):
        return {"error": {"type": type(exc).__name__, "message": str(exc), "code": exc.fault, "engine": exc.engine}}
    return {"error": {"type": type(exc).__name__, "message": str(exc)}}


def retry_headers(exc: RetryableError) -> dict[str, str]:
    """When to retry, as the openai and anthropic SDKs read it: `retry-after-ms`, else `Retry-After` in seconds."""
    return {
        "Retry-After": str(max(1, math.ceil(exc.retry_after_s))),
        "retry-after-ms": str(max(1, round(exc.retry_after_s * 1000))),
    }


def error_headers(exc: TitoError) -> dict[str, str]:
    """Retry-After for an error a client should retry later (the engine down or overloaded)."""
    return {"retry-after": str(exc.retry_after)} if exc.retry_after is not None else {}


class PausedError(RetryableError):
    """Turns are paused for a weight update (`POST /admin/pause`): a 429 the SDKs retry after `Retry-After`."""

    http_status = 429


def openai_error(exc: Exception) -> tuple[dict[str, Any], int]:
    """OpenAI's error shape (`error_body`) and the status, for any failure: one that is no TitoError is a 500."""
    if isinstance(exc, TitoError):
        return error_body(exc), exc.http_status
    return {"error": {"type": "InternalError", "message": internal_error_words(exc)}}, 500


def internal_error_words(exc: Exception) -> str:
    """What a client is told of a failure that is no TitoError (a bug of tito's), in every dialect."""
    return f"internal error: {type(exc).__name__}: {exc}"
