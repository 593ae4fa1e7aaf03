"""HTTP plumbing the SGLang and vLLM engines share: JSON and SSE calls on a small connection pool (httpx for https
and GETs), typed errors.

Bodies are encoded and decoded with orjson: a 32k-token reply is 1.4 MB of JSON, which the standard library
decodes 3-10x slower (benchmarks/engines.py).

Every transport or protocol failure leaves here as a `tito.errors` Engine*Error carrying the engine's own words
(its `{"error": {"message": ...}}` body, or the transport's message); no `httpx` exception or `KeyError` escapes.

Imports nothing from tito but errors, engines.connections and engines.id_json.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncGenerator, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
import orjson

from tito.engines.connections import Body, ConnectionPool, HttpProtocolError, StreamedReply
from tito.engines.id_json import body_json
from tito.errors import (
    EngineError,
    EngineRequestError,
    EngineResponseError,
    EngineTimeoutError,
    EngineUnavailableError,
)

JsonObject = dict[str, Any]
"""A decoded JSON object from an engine's reply."""

REFUSALS = (400, 413, 422)
"""Statuses by which an engine refuses the request's content (prompt too long, a sampling parameter out of range):
the client's to fix, so they stay 400. Every other engine status is the engine's fault, never the client's."""
SESSION_HEADER = "X-Session-ID"
"""The session identity vllm-router's `consistent_hash` and `sticky_least_loaded` policies route by."""
RELEASE_ROUTE = "/finish_session"
"""vllm-router's route that ends a session's sticky entry (`POST /finish_session?session_id=ID`)."""
SSE_DONE = b"[DONE]"


class HttpEngineClient:
    """One engine server: pooled connections, a timeout per request, errors mapped to Engine*Error."""

    def __init__(
        self, engine: str, base_url: str, *, timeout: float, connect_timeout: float = 10.0, stream_interval: float = 0.0
    ) -> None:
        """`stream_interval`: a streamed reply's events are read at most once per this many seconds (those that
        arrive in between as one burst; `connections._BodyPieces`); 0 reads each as it arrives."""
        self.engine = engine
        self.base_url = base_url.rstrip("/")
        self._client = httpx.AsyncClient(
            base_url=self.base_url,
            timeout=httpx.Timeout(timeout, connect=min(connect_timeout, timeout)),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
        )
        self._pool, self._prefix = _json_pool(self.base_url, timeout, min(connect_timeout, timeout), stream_interval)
        self.release_route: bool | None = None
        """Whether the server has RELEASE_ROUTE: None until the first release tells."""

    async def get(self, path: str) -> httpx.Response:
        """GET `path`; a non-2xx status raises the matching Engine*Error."""
        try:
            response = await self._client.get(path)
        except Exception as exc:
            if (mapped := self._engine_error(path, exc)) is None:
                raise
            raise mapped from exc
        self.raise_for_status(path, response)
        return response

    async def post_json(self, path: str, body: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> Any:
        """POST a JSON body and decode the JSON reply (None for an empty body); over plain http, on the small
        connection pool (tito.engines.connections): the per-turn call."""
        payload = body_json(body)
        try:
            if self._pool is None:
                response = await self._client.post(path, content=b"".join(payload), headers=_json_headers(headers))
                status, content = response.status_code, response.content
            else:
                reply = await self._pool.request("POST", self._prefix + path, payload, _json_headers(headers))
                status, content = reply.status, reply.content
        except Exception as exc:
            if (mapped := self._engine_error(path, exc)) is None:
                raise
            raise mapped from exc
        if status >= 400:
            self.raise_for_status(path, httpx.Response(status, content=content))
        if not content:
            return None
        return self.decode(path, content)

    async def post_sse(
        self, path: str, body: Mapping[str, Any], headers: Mapping[str, str] | None = None
    ) -> AsyncGenerator[list[JsonObject], None]:
        """POST and yield the SSE `data:` events of each read as one list of JSON objects (a burst the engine wrote
        at once is decoded once and handed on once), until `data: [DONE]` or the end of the stream; over plain
        http, on the connection pool too (a streamed turn's call). A malformed, non-object or `error` event is
        raised after the events before it were yielded.

        Closing the iterator before the stream's end closes the connection: both SGLang and vLLM abort a request
        whose client went away. After `[DONE]` the body is read to its end, so the connection goes back to the pool.
        """
        payload = body_json(body)
        try:
            async with self._streamed_post(path, payload, _json_headers(headers)) as reply:
                status, pieces = reply.status, reply.pieces
                if status >= 400:
                    self.raise_for_status(path, httpx.Response(status, content=b"".join([p async for p in pieces])))
                data = SseData()
                async for piece in pieces:  # after [DONE] too: the body is read to its end, so the connection is kept
                    events, error = self.decode_events(path, data.feed(piece))
                    if events:
                        yield events
                    if error is not None:
                        raise error
                events, error = self.decode_events(path, data.end())
                if events:
                    yield events
                if error is not None:
                    raise error
        except Exception as exc:
            if (mapped := self._engine_error(path, exc)) is None:
                raise
            raise mapped from exc

    def decode_events(self, path: str, payloads: list[bytes]) -> tuple[list[JsonObject], EngineError | None]:
        """SSE `data:` payloads as JSON objects, in one parse of them all: the events up to the first malformed,
        non-object or `error` one, and the error that one is (None when there is none).

        The payloads are decoded as one JSON array; when that fails, or gives another number of values than there
        are payloads (a payload holding two values, or none), each is decoded alone so the error names the one at
        fault."""
        if not payloads:
            return [], None
        try:
            events = orjson.loads(b"[" + b",".join(payloads) + b"]")
        except ValueError:
            events = None
        if events is None or len(events) != len(payloads):
            events = []
            for payload in payloads:
                try:
                    events.append(self.decode(path, payload.strip()))
                except EngineResponseError as exc:
                    return events, exc
        for index, event in enumerate(events):
            if type(event) is not dict:
                shown = payloads[index].strip()[:200].decode("utf-8", "replace")
                detail = f"{path}: SSE event is not a JSON object: {shown}"
                return events[:index], EngineResponseError(self.engine, detail, fault="malformed")
            if "error" in event:
                return events[:index], self.error_event(path, event)
        return events, None

    def _streamed_post(
        self, path: str, body: Body, headers: Mapping[str, str]
    ) -> AbstractAsyncContextManager[StreamedReply]:
        """A POST's reply with its body as it arrives: on the pool over plain http, on httpx otherwise (https)."""
        if self._pool is not None:
            return self._pool.stream("POST", self._prefix + path, body, headers)
        return _HttpxStreamed(
            self._client, self._client.build_request("POST", path, content=b"".join(body), headers=headers)
        )

    def decode(self, path: str, content: bytes) -> Any:
        try:
            return orjson.loads(content)
        except ValueError as exc:
            detail = f"{path}: reply is not JSON: {content[:200]!r}"
            raise EngineResponseError(self.engine, detail, fault="malformed") from exc

    def raise_for_status(self, path: str, response: httpx.Response) -> None:
        """Map an error status to the Engine*Error the client sees, with the engine's words: 503/429 unavailable
        (503), 408/504 timeout (504), 400/413/422 a refusal of the request's content (400), any other status
        (a missing route's 404, a 500) a bad reply (502)."""
        status = response.status_code
        if status < 400:
            return
        words = f"{path}: {engine_words(response.content)}"
        if status in (429, 503):
            raise EngineUnavailableError(self.engine, words, status=status)
        if status in (408, 504):
            raise EngineTimeoutError(self.engine, words, status=status)
        if status in REFUSALS:
            raise EngineRequestError(self.engine, words, status=status)
        fault = "not_found" if status in (404, 405) else f"status_{status // 100}xx"
        raise EngineResponseError(self.engine, words, status=status, fault=fault)

    def error_event(self, path: str, event: JsonObject) -> EngineError:
        """The error an error sent inside a 200 stream (`data: {"error": {...}}`) is: its `code` when given, else a
        refusal (400), as SGLang answers the same failure (a ValueError) on a non-streaming call."""
        error = event["error"]
        code = error.get("code") if isinstance(error, dict) else None
        status = code if isinstance(code, int) and code >= 400 else 400
        words = f"{path} stream: {error_words(event) or event}"
        if status < 500:
            return EngineRequestError(self.engine, words, status=status)
        return EngineResponseError(self.engine, words, status=status)

    async def release_session(self, session_id: str) -> bool:
        """End the session's sticky entry at a router in front of the engines (vllm-router's `/finish_session`);
        False, and never asked again, when the server has no such route (an engine itself, the SGLang Model
        Gateway): a router without a release route is tolerated."""
        if self.release_route is False:
            return False
        try:
            await self.post_json(f"{RELEASE_ROUTE}?session_id={quote(session_id, safe='')}", {})
        except EngineResponseError as exc:
            if exc.engine_status not in (404, 405):
                raise
            self.release_route = False
            return False
        self.release_route = True
        return True

    async def aclose(self) -> None:
        await self._client.aclose()
        if self._pool is not None:
            await self._pool.aclose()

    def _engine_error(self, path: str, exc: Exception) -> EngineError | None:
        """The Engine*Error a transport or protocol failure is; None for an Engine*Error already, or any other
        exception (raised as it is). A plain try/except at each call: an async context manager per request cost
        ~5 us of the event loop's thread."""
        if isinstance(exc, EngineError):
            return None
        if isinstance(exc, httpx.TimeoutException):
            return EngineTimeoutError(self.engine, f"{path}: no answer in time ({type(exc).__name__})")
        if isinstance(exc, httpx.ConnectError | httpx.WriteError):
            return EngineUnavailableError(
                self.engine, f"{path} on {self.base_url}: {type(exc).__name__}: {exc or 'connection refused'}"
            )
        if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError):
            detail = f"{path} on {self.base_url}: the connection was cut mid-reply: {type(exc).__name__}: {exc}"
            return EngineResponseError(self.engine, detail, fault="cut")
        if isinstance(exc, httpx.HTTPError):
            return EngineResponseError(self.engine, f"{path}: {type(exc).__name__}: {exc}")
        if isinstance(exc, TimeoutError):
            return EngineTimeoutError(self.engine, f"{path}: no answer in time")
        if isinstance(exc, asyncio.IncompleteReadError | ConnectionResetError | BrokenPipeError):
            detail = f"{path} on {self.base_url}: the connection was cut mid-reply: {type(exc).__name__}: {exc}"
            return EngineResponseError(self.engine, detail, fault="cut")
        if isinstance(exc, OSError):  # refused, unreachable: the engine is down
            return EngineUnavailableError(
                self.engine, f"{path} on {self.base_url}: {type(exc).__name__}: {exc or 'connection lost'}"
            )
        if isinstance(exc, HttpProtocolError):
            return EngineResponseError(self.engine, f"{path}: {exc}")
        return None


class _HttpxStreamed:
    """`HttpEngineClient._streamed_post` over httpx (https): the reply's status and its body as it arrives; the
    response is closed when the block ends."""

    def __init__(self, client: httpx.AsyncClient, request: httpx.Request) -> None:
        self._client = client
        self._request = request
        self._response: httpx.Response | None = None

    async def __aenter__(self) -> StreamedReply:
        response = self._response = await self._client.send(self._request, stream=True)
        return StreamedReply(response.status_code, dict(response.headers), response.aiter_bytes())

    async def __aexit__(self, *exc_info: object) -> None:
        if self._response is not None:
            await self._response.aclose()


class SseData:
    """An SSE body's `data:` payloads, fed piece by piece as it arrives: each `feed` gives those of the lines it
    completes (a line ends at LF, CRLF or CR), found in one pass over the piece, not line by line. Blank lines,
    comments and `event:` lines are skipped; `done` once `data: [DONE]` came, and nothing after it is given."""

    def __init__(self) -> None:
        self.done = False
        self._pending = b""

    def feed(self, piece: bytes) -> list[bytes]:
        if self.done:
            return []
        text = self._pending + piece if self._pending else piece
        if b"\r" in text:  # CRLF or CR line ends (a CR at the end is a line end: an LF after it makes a blank line)
            text = text.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        end = text.rfind(b"\n") + 1
        self._pending = text[end:]
        return self._payloads(text, end) if end else []

    def end(self) -> list[bytes]:
        """The payload of a last line that no line end closed."""
        text, self._pending = self._pending, b""
        return self._payloads(text, len(text)) if text and not self.done else []

    def _payloads(self, text: bytes, end: int) -> list[bytes]:
        payloads = _DATA_LINE.findall(text, 0, end)
        if text.find(SSE_DONE, 0, end) >= 0:  # rare: find the [DONE] event itself (a text may hold the word)
            for index, payload in enumerate(payloads):
                if payload.strip() == SSE_DONE:
                    self.done = True
                    return payloads[:index]
        return payloads


_DATA_LINE = re.compile(rb"^data:(.*)$", re.MULTILINE)
"""An SSE `data:` line's payload (one event per line, as SGLang and vLLM write them)."""


def engine_words(content: bytes) -> str:
    """The engine's own error message out of an error reply's body, or the body's text."""
    text = content.decode("utf-8", "replace").strip()
    try:
        body = orjson.loads(text)
    except ValueError:
        return text[:500] or "(empty body)"
    return error_words(body) or text[:500]


def error_words(body: Any) -> str | None:
    """The message of `{"error": {"message"}}` (SGLang, vLLM), `{"error": "..."}`, `{"message"}` or `{"detail"}`."""
    if not isinstance(body, dict):
        return None
    error = body.get("error", body)
    if isinstance(error, str):
        return error[:500]
    if isinstance(error, dict):
        for key in ("message", "detail"):
            if isinstance(error.get(key), str | list):
                return str(error[key])[:500]
    return None


def require(engine: str, container: Any, key: str, where: str) -> Any:
    """`container[key]`, or an EngineResponseError naming the missing field and where it was expected."""
    if not isinstance(container, dict) or key not in container:
        shown = sorted(container)[:12] if isinstance(container, dict) else type(container).__name__
        raise EngineResponseError(engine, f"reply has no {where}.{key} (got {shown})", fault="missing_field")
    return container[key]


def _json_pool(
    base_url: str, timeout: float, connect_timeout: float, stream_interval: float
) -> tuple[ConnectionPool | None, str]:
    """The JSON POST pool and the URL's path prefix for a plain `http://` URL; (None, "") otherwise (https: httpx,
    which reads a stream as it arrives)."""
    url = urlsplit(base_url)
    if url.scheme != "http" or not url.hostname:
        return None, ""
    pool = ConnectionPool(
        url.hostname, url.port or 80, timeout=timeout, connect_timeout=connect_timeout, stream_interval=stream_interval
    )
    return pool, url.path.rstrip("/")


def _json_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    return {"content-type": "application/json", **(headers or {})}
