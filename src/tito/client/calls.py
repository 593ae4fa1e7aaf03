"""What the sync and async clients share: each call's request (method, path, body), the decoding of its reply into
a value or a typed error, and the retry policy within a call's deadline. Only the transport differs between them.

Retried inside a call: a refused connection (the request never left: safe for every call, also a create) and a 503
that carries `Retry-After` (a server replaying its journal, taking a session over), never past the deadline. A
connection that broke after the request left is not retried (a create could run twice): ServerUnavailableError.

Imports from tito: client.errors.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import httpx

from tito.client.errors import (
    AtCapacityError,
    BadRequestError,
    DeadlineExceededError,
    ServerError,
    ServerUnavailableError,
    SessionGoneError,
    TitoClientError,
)

T = TypeVar("T")

DEFAULT_DEADLINE_S = 30.0
"""A call's deadline when none is given: every retry and wait of the call ends by then."""
_CONNECT_BACKOFF_S = (0.05, 0.1, 0.2, 0.4, 0.8, 1.0)


@dataclass(frozen=True)
class SessionHandle:
    """A session and the server that holds it: the base URL an agent's SDK is pointed at, per dialect."""

    session_id: str
    server_url: str

    @property
    def openai_base_url(self) -> str:
        """OpenAI chat completions and Responses (`OpenAI(base_url=...)`): `/v1/chat/completions`, `/v1/responses`."""
        return f"{self.server_url}/sessions/{self.session_id}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """Anthropic Messages (`Anthropic(base_url=...)`, `ANTHROPIC_BASE_URL`): the SDK appends `/v1/messages`."""
        return f"{self.server_url}/sessions/{self.session_id}"


@dataclass(frozen=True)
class Samples:
    """A session's samples: `samples` for the JSON formats (tito's `json`, a trainer's projection), `body` always
    (the raw reply; the safetensors container for `safetensors`)."""

    session_id: str
    format: str
    samples: list[dict[str, Any]]
    body: bytes
    upstream: str | None = None


@dataclass(frozen=True)
class ServerLoad:
    """`GET /load`: live sessions, turns in flight and readiness, what the pool places sessions by."""

    sessions: int
    turns_in_flight: int
    ready: bool

    @property
    def score(self) -> int:
        return self.sessions + self.turns_in_flight


@dataclass(frozen=True)
class Call(Generic[T]):
    """One HTTP call: its request and how its 2xx reply becomes a value."""

    method: str
    path: str
    decode: Callable[[httpx.Response], T]
    body: Mapping[str, Any] | None = None


def _options(**given: Any) -> dict[str, Any]:
    return {name: value for name, value in given.items() if value is not None}


def create_call(server_url: str, **options: Any) -> Call[SessionHandle]:
    """`POST /sessions` with the options the caller set (the server fills the rest from its launch options)."""

    def decode(response: httpx.Response) -> SessionHandle:
        return SessionHandle(str(response.json()["session_id"]), server_url)

    return Call("POST", "/sessions", decode, _options(**options) or None)


def samples_call(session_id: str, format: str, **options: Any) -> Call[Samples]:
    def decode(response: httpx.Response) -> Samples:
        if format == "safetensors":
            return Samples(session_id, format, [], response.content)
        body = response.json()
        return Samples(session_id, format, list(body["samples"]), response.content, body.get("upstream"))

    return Call("POST", f"/sessions/{session_id}/samples", decode, _options(format=format, **options))


def delete_call(session_id: str) -> Call[None]:
    return Call("DELETE", f"/sessions/{session_id}", lambda response: None)


def load_call() -> Call[ServerLoad]:
    def decode(response: httpx.Response) -> ServerLoad:
        body = response.json()
        return ServerLoad(int(body["sessions"]), int(body["turns_in_flight"]), bool(body["ready"]))

    return Call("GET", "/load", decode)


def ready_call() -> Call[bool]:
    return Call("GET", "/ready", lambda response: True)


def headers(api_key: str | None) -> dict[str, str]:
    return {"authorization": f"Bearer {api_key}"} if api_key else {}


class Attempts:
    """One call's retries against its deadline: how long to wait before the next attempt, or the error to raise."""

    def __init__(self, url: str, call: Call[Any], deadline_s: float) -> None:
        self.url = url
        self.call = call
        self.deadline_s = deadline_s
        self.ends = time.monotonic() + deadline_s
        self.tries = 0

    def remaining(self) -> float:
        """Seconds left; DeadlineExceededError once none are."""
        left = self.ends - time.monotonic()
        if left <= 0:
            raise self.deadline_exceeded("no answer")
        return left

    def deadline_exceeded(self, last: str) -> DeadlineExceededError:
        where = f"{self.call.method} {self.url}{self.call.path}"
        return DeadlineExceededError(f"{where}: deadline of {self.deadline_s:g}s passed ({last})", url=self.url)

    def after_transport_error(self, error: httpx.TransportError) -> float:
        """The wait before retrying a refused connection; ServerUnavailableError for a break after sending."""
        where = f"{self.call.method} {self.url}{self.call.path}"
        if isinstance(error, httpx.TimeoutException) and not isinstance(error, httpx.ConnectTimeout):
            raise self.deadline_exceeded(f"{type(error).__name__}")
        if not isinstance(error, httpx.ConnectError | httpx.ConnectTimeout):
            raise ServerUnavailableError(f"{where}: {type(error).__name__}: {error}", url=self.url)
        return self._wait(_CONNECT_BACKOFF_S[min(self.tries, len(_CONNECT_BACKOFF_S) - 1)], f"connection: {error}")

    def after_response(self, response: httpx.Response) -> float | None:
        """None: the reply is final (a value, or a typed error raised by `result`); else the wait before a retry."""
        retry_after = response.headers.get("retry-after-ms") or response.headers.get("retry-after")
        if response.status_code != 503 or retry_after is None or _error_type(response) == "AtCapacityError":
            return None
        seconds = float(retry_after) / (1000 if "retry-after-ms" in response.headers else 1)
        return self._wait(max(seconds, 0.01), f"503 {_message(response)}")

    def _wait(self, seconds: float, last: str) -> float:
        self.tries += 1
        left = self.ends - time.monotonic()
        if left <= 0:
            raise self.deadline_exceeded(last)
        return min(seconds, left)

    def result(self, response: httpx.Response) -> Any:
        """The decoded value of a 2xx reply, else the typed error carrying the server's message."""
        if response.is_success:
            return self.call.decode(response)
        raise error_for(response, self.url)


def _error_type(response: httpx.Response) -> str | None:
    try:
        error = response.json().get("error")
    except ValueError:
        return None
    return str(error.get("type")) if isinstance(error, dict) and error.get("type") else None


def _message(response: httpx.Response) -> str:
    try:
        error = response.json().get("error")
    except ValueError:
        return response.text[:500] or response.reason_phrase
    if isinstance(error, dict) and "message" in error:
        return str(error["message"])
    return response.text[:500]


def error_for(response: httpx.Response, url: str) -> TitoClientError:
    """The typed error of a non-2xx reply, with the server's message, status and error type."""
    status, kind, text = response.status_code, _error_type(response), _message(response)
    if status in (404, 410):
        return SessionGoneError(text, status=status, error_type=kind)
    if status == 429 or kind == "AtCapacityError":
        return AtCapacityError(text, status=status, error_type=kind)
    if 400 <= status < 500:
        return BadRequestError(text, status=status, error_type=kind)
    if status == 503:
        return ServerUnavailableError(text, url=url, status=status, error_type=kind)
    return ServerError(text, status=status, error_type=kind)
