"""The client's typed errors: what a trainer branches on (mask a lost rollout, retry elsewhere, fix its request),
each carrying the server's own message, its HTTP status and its error type.

TitoClientError
 ├── BadRequestError         a 4xx the request must change for (400, 401, 409, 413, 422): the server's words
 ├── SessionGoneError        404 (never existed here) or 410 (deleted or expired)
 ├── AtCapacityError         the server holds its most sessions (503 AtCapacityError) or says 429
 ├── ServerError             the server answered a 5xx (an engine fault, an internal error)
 ├── ServerUnavailableError  no answer: refused, reset, still 503-retrying when the deadline came
 │    └── DeadlineExceededError   the call's deadline passed
 └── SessionLostError        (the pool) the session's server is dead: the rollout cannot be continued

Imports nothing from tito.
"""

from __future__ import annotations


class TitoClientError(Exception):
    """Base of every error the client raises; `status` and `error_type` are the server's (None: no answer)."""

    def __init__(self, message: str, *, status: int | None = None, error_type: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.error_type = error_type


class BadRequestError(TitoClientError):
    """The server refused the request as made (bad options, a reward for an unknown response id, a wrong key)."""


class SessionGoneError(TitoClientError):
    """The session is not on that server: deleted, expired (410) or never created there (404)."""


class AtCapacityError(TitoClientError):
    """The server holds its maximum of live sessions: create the session elsewhere or later."""


class ServerError(TitoClientError):
    """The server answered with a 5xx that retrying within the call cannot fix (an engine fault, an internal error)."""


class ServerUnavailableError(TitoClientError):
    """The server did not answer in a usable way: connection refused or reset, or busy (503) until the deadline."""

    def __init__(self, message: str, *, url: str, status: int | None = None, error_type: str | None = None) -> None:
        super().__init__(message, status=status, error_type=error_type)
        self.url = url


class DeadlineExceededError(ServerUnavailableError):
    """The call's deadline passed before the server answered; the call returned then, never later."""


class SessionLostError(TitoClientError):
    """The pool's server for this session is dead (its process or node is gone, no shared journal to continue it):
    the rollout is lost and the trainer masks it."""

    def __init__(self, session_id: str, server_url: str, reason: str) -> None:
        super().__init__(f"session {session_id} is lost: its server {server_url} is dead ({reason})")
        self.session_id = session_id
        self.server_url = server_url
        self.reason = reason
