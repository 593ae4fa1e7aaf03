"""A small HTTP/1.1 client for the engine's per-turn POST, whole or streamed: kept-alive connections, constant work
per request.

Why not httpx here: under load its pool checks every pooled connection's socket on every request (`has_expired`:
a `getpeername` and a readability poll per connection), so one engine call costs more with each connection kept,
and its request/response models add more per call; beside a fast engine that was most of tito's own cost per turn
(benchmarks/server_overhead.py --wire). This client sends one request on an idle connection (most recently used
first), reads one response (a `content-length`, chunked or read-to-close body) and puts the connection back. An idle
connection the server has closed is seen at no cost (the event loop already fed its end of stream), one idle past
`keepalive_expiry` is closed before the server's own keep-alive timeout can race a request. A request is sent once
more, on a new connection, only when the server provably did not read it: its reused connection was reset (the
peer's kernel answers a close with unread bytes, or bytes arriving after a close, with a reset, so the server never
read the whole request). A reused connection that merely ends before any reply byte is ambiguous (the server may
have read the request and started a generation before closing), so that is an error, never an automatic re-send:
a POST /generate is not idempotent. A request cancelled or failed midway closes its connection, which is
how SGLang and vLLM learn that their client went away. A streamed reply (`stream`) yields its body's pieces as they
arrive; its connection goes back to the pool only when the body was read to its end, and every wait for the next
piece has `timeout` seconds (httpx's read timeout), so a long generation never times out while ids keep coming.

Failures are the built-in ones: `TimeoutError`, `OSError` (refused, reset, closed), `asyncio.IncompleteReadError`,
`HttpProtocolError` for a reply that is not HTTP/1.1; the engine client maps them to Engine*Errors.

Imports nothing from tito.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass

MAX_HEAD_BYTES = 64 * 1024


class HttpProtocolError(Exception):
    """The server's reply is not well-formed HTTP/1.1."""


@dataclass(frozen=True)
class HttpReply:
    status: int
    headers: dict[str, str]
    """Lower-cased names."""
    content: bytes


@dataclass(frozen=True)
class StreamedReply:
    status: int
    headers: dict[str, str]
    """Lower-cased names."""
    pieces: AsyncIterator[bytes]
    """The body as it arrives (a chunked body's chunks)."""


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.idle_since = time.monotonic()

    def usable(self, expiry: float) -> bool:
        return not self.reader.at_eof() and not self.writer.is_closing() and time.monotonic() - self.idle_since < expiry

    def close(self) -> None:
        self.writer.close()


class ConnectionPool:
    """Kept-alive HTTP/1.1 connections to one `host:port`; any number open at once, `max_idle` kept between calls."""

    def __init__(
        self, host: str, port: int, *, timeout: float, connect_timeout: float, keepalive_expiry: float = 4.0,
        max_idle: int = 1024,
    ) -> None:  # fmt: skip
        self.host = host
        self.port = port
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.keepalive_expiry = keepalive_expiry
        """Below uvicorn's default keep-alive timeout (5 s), which SGLang and vLLM servers run with."""
        self.max_idle = max_idle
        self._idle: deque[_Connection] = deque()
        self._host_header = f"host: {host}:{port}\r\n".encode()

    async def request(self, method: str, path: str, body: bytes, headers: Mapping[str, str]) -> HttpReply:
        """Send one request and read its whole reply within `timeout` seconds."""
        head = self._head(method, path, len(body), headers)
        async with asyncio.timeout(self.timeout):
            connection, status_line = await self._send(head, body)
            kept = False
            try:
                reply, kept = await _read_reply(connection.reader, status_line)
                return reply
            finally:
                self._release(connection, kept)

    @contextlib.asynccontextmanager
    async def stream(
        self, method: str, path: str, body: bytes, headers: Mapping[str, str]
    ) -> AsyncIterator[StreamedReply]:
        """Send one request and yield its reply with the body still to read; leaving the block before the body's end
        (or on any failure) closes the connection."""
        head = self._head(method, path, len(body), headers)
        async with asyncio.timeout(self.timeout):
            connection, status_line = await self._send(head, body)
        pieces: _BodyPieces | None = None
        keep_alive = False
        try:
            async with asyncio.timeout(self.timeout):
                status, headers_read, keep_alive = await _read_head(connection.reader, status_line)
            pieces = _BodyPieces(connection.reader, _body_end(status, headers_read), self.timeout)
            yield StreamedReply(status, headers_read, pieces)
        finally:
            kept = pieces is not None and pieces.ended and keep_alive and pieces.body_end != _TO_CLOSE
            self._release(connection, kept)

    async def aclose(self) -> None:
        while self._idle:
            self._idle.pop().close()

    def _head(self, method: str, path: str, length: int, headers: Mapping[str, str]) -> bytes:
        lines = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        if lines.count("\n") != len(headers) or lines.count("\r") != len(headers):
            raise ValueError(f"a header of {path} holds a line break: {dict(headers)!r}")
        return (
            f"{method} {path} HTTP/1.1\r\n".encode()
            + self._host_header
            + (f"content-length: {length}\r\n{lines}\r\n".encode())
        )

    def _take_idle(self) -> _Connection | None:
        while self._idle:
            connection = self._idle.pop()
            if connection.usable(self.keepalive_expiry):
                return connection
            connection.close()
        return None

    async def _connect(self) -> _Connection:
        async with asyncio.timeout(self.connect_timeout):
            reader, writer = await asyncio.open_connection(self.host, self.port, limit=MAX_HEAD_BYTES)
        return _Connection(reader, writer)

    async def _send(self, head: bytes, body: bytes) -> tuple[_Connection, bytes]:
        """Send the request on an idle connection, or a new one, and wait for the reply's status line. The caller
        releases the connection (`_release`: back to the pool only after a whole reply that leaves it open)."""
        connection = self._take_idle()
        if connection is not None:
            try:
                return connection, await self._send_on(connection, head, body)
            except _ClosedBeforeReply as exc:
                if not isinstance(exc.__cause__, ConnectionError):
                    raise ConnectionResetError(
                        "the engine closed a reused connection before replying; it may have read the request, so it "
                        "is not sent again"
                    ) from exc
                # reset: the server never read the whole request (see the module docstring); send it anew
        connection = await self._connect()
        try:
            return connection, await self._send_on(connection, head, body)
        except _ClosedBeforeReply as exc:
            raise ConnectionResetError("the engine closed the connection before replying") from exc

    async def _send_on(self, connection: _Connection, head: bytes, body: bytes) -> bytes:
        """Write the request on `connection` and wait for the status line; `_ClosedBeforeReply` when the connection
        ends first. Any failure or cancellation closes the connection."""
        try:
            writer = connection.writer
            writer.write(head)
            if body:
                writer.write(body)
            try:
                await writer.drain()
                return await connection.reader.readuntil(b"\r\n")
            except (ConnectionError, asyncio.IncompleteReadError) as exc:
                raise _ClosedBeforeReply from exc
            except asyncio.LimitOverrunError:
                raise HttpProtocolError(f"a status line longer than {MAX_HEAD_BYTES} bytes") from None
        except BaseException:
            connection.close()
            raise

    def _release(self, connection: _Connection, reusable: bool) -> None:
        """Back to the idle connections when the reply left it open and was read whole; else closed."""
        if reusable and len(self._idle) < self.max_idle:
            connection.idle_since = time.monotonic()
            self._idle.append(connection)
        else:
            connection.close()


class _ClosedBeforeReply(Exception):
    """The connection ended before the first byte of a reply."""


async def _read_reply(reader: asyncio.StreamReader, status_line: bytes) -> tuple[HttpReply, bool]:
    """The reply after its status line, and whether the connection stays open for another request."""
    status, headers, keep_alive = await _read_head(reader, status_line)
    body_end = _body_end(status, headers)
    if body_end == _CHUNKED:
        return HttpReply(status, headers, await _read_chunks(reader)), keep_alive
    if body_end == _TO_CLOSE:
        return HttpReply(status, headers, await reader.read()), False  # the body runs to the end of the connection
    return HttpReply(status, headers, await reader.readexactly(body_end) if body_end else b""), keep_alive


async def _read_head(reader: asyncio.StreamReader, status_line: bytes) -> tuple[int, dict[str, str], bool]:
    """The status, the headers (lower-cased names) and whether the connection stays open after the body."""
    try:
        version, status_text = status_line.split(b" ", 2)[:2]
        status = int(status_text)
    except ValueError:
        raise HttpProtocolError(f"not an HTTP status line: {status_line[:100]!r}") from None
    if not version.startswith(b"HTTP/1."):
        raise HttpProtocolError(f"not an HTTP/1.x reply: {status_line[:100]!r}")
    try:
        raw_head = await reader.readuntil(b"\r\n\r\n") if not reader.at_eof() else b""
    except asyncio.LimitOverrunError:
        raise HttpProtocolError(f"reply headers longer than {MAX_HEAD_BYTES} bytes") from None
    except asyncio.IncompleteReadError as exc:
        raw_head = exc.partial
    headers: dict[str, str] = {}
    for line in raw_head.split(b"\r\n"):
        if line:
            name, separator, value = line.partition(b":")
            if not separator:
                raise HttpProtocolError(f"a malformed reply header: {line[:100]!r}")
            headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    return status, headers, version == b"HTTP/1.1" and headers.get("connection", "").lower() != "close"


_CHUNKED = -1
_TO_CLOSE = -2


def _body_end(status: int, headers: Mapping[str, str]) -> int:
    """How the body ends: its content-length (0: no body), `_CHUNKED`, or `_TO_CLOSE` (at the connection's end)."""
    if status in (204, 304) or 100 <= status < 200:
        return 0
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return _CHUNKED
    length = headers.get("content-length")
    if length is None:
        return _TO_CLOSE
    if not length.isdigit():
        raise HttpProtocolError(f"content-length {length!r} is not a number")
    return int(length)


async def _read_chunks(reader: asyncio.StreamReader) -> bytes:
    return b"".join([piece async for piece in _BodyPieces(reader, _CHUNKED, None)])


class _BodyPieces:
    """A reply's body as it arrives, each wait for the next read at most `timeout` seconds (None: no limit): a
    chunked body's complete chunks of each read joined into one piece (a burst of SSE events is one piece, not one
    per event), a sized or read-to-close body's reads as they come. The reading is done here, in `__anext__`, not in
    a stack of generators that each pass every piece on; `ended` once the body's end was read."""

    def __init__(self, reader: asyncio.StreamReader, body_end: int, timeout: float | None) -> None:
        self.reader = reader
        self.body_end = body_end
        self.timeout = timeout
        self.ended = body_end == 0
        self._remaining = body_end
        self._buffer = bytearray()

    def __aiter__(self) -> _BodyPieces:
        return self

    async def __anext__(self) -> bytes:
        if self.ended:
            raise StopAsyncIteration
        if self.body_end == _CHUNKED:
            return await self._next_chunks()
        remaining = self._remaining
        async with asyncio.timeout(self.timeout):
            piece = await self.reader.read(65536 if remaining < 0 else min(remaining, 65536))
        if not piece:
            if remaining > 0:
                raise asyncio.IncompleteReadError(b"", remaining)
            self.ended = True
            raise StopAsyncIteration
        if remaining > 0:
            self._remaining = remaining - len(piece)
            self.ended = self._remaining == 0
        return piece

    async def _next_chunks(self) -> bytes:
        buffer = self._buffer
        while True:
            async with asyncio.timeout(self.timeout):
                received = await self.reader.read(65536)
            if not received:
                raise asyncio.IncompleteReadError(bytes(buffer), None)
            buffer += received
            data, consumed, ended = _complete_chunks(buffer)
            del buffer[:consumed]
            if ended:
                if buffer:  # a server answering one request at a time sends nothing after the reply
                    raise HttpProtocolError(
                        f"{len(buffer)} bytes after the end of a chunked body: {bytes(buffer[:100])!r}"
                    )
                self.ended = True
                if not data:
                    raise StopAsyncIteration
            if data:
                return data


def _complete_chunks(buffer: bytearray) -> tuple[bytes, int, bool]:
    """The data of the complete chunks at the start of `buffer`, how many bytes they take, and whether the last
    chunk (size 0, then its trailers and an empty line) is among them."""
    pieces: list[bytearray] = []
    position = 0
    while (line_end := buffer.find(b"\r\n", position)) >= 0:
        try:
            size = int(buffer[position:line_end], 16)  # a bare size; one with extensions (rare) is split first
        except ValueError:
            size = _extended_chunk_size(bytes(buffer[position:line_end]))
        start = line_end + 2
        if size == 0:
            if buffer.startswith(b"\r\n", start):
                return b"".join(pieces), start + 2, True
            trailers_end = buffer.find(b"\r\n\r\n", start)
            if trailers_end < 0:
                break  # the trailers are not all here yet
            return b"".join(pieces), trailers_end + 4, True
        end = start + size
        if len(buffer) < end + 2:
            break
        if not buffer.startswith(b"\r\n", end):
            raise HttpProtocolError(f"a chunk of {size} bytes is not followed by CRLF")
        pieces.append(buffer[start:end])
        position = end + 2
    return b"".join(pieces), position, False


def _extended_chunk_size(size_field: bytes) -> int:
    """The size of a chunk-size line with extensions (`5;name=value`)."""
    try:
        return int(size_field.split(b";", 1)[0].strip(), 16)
    except ValueError:
        raise HttpProtocolError(f"a malformed chunk size: {size_field[:100]!r}") from None
