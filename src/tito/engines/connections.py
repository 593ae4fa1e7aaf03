"""A small HTTP/1.1 client for the engine's per-turn JSON POST: kept-alive connections, constant work per request.

Why not httpx here: under load its pool checks every pooled connection's socket on every request (`has_expired`:
a `getpeername` and a readability poll per connection), so one engine call costs more with each connection kept,
and its request/response models add more per call; beside a fast engine that was most of tito's own cost per turn
(benchmarks/server_overhead.py --wire). This client sends one request on an idle connection (most recently used
first), reads one response (a `content-length`, chunked or read-to-close body) and puts the connection back. An idle
connection the server has closed is seen at no cost (the event loop already fed its end of stream), one idle past
`keepalive_expiry` is closed before the server's own keep-alive timeout can race a request, and a request whose
reused connection turns out to be closed before any byte of a reply arrives is sent once more on a new one (the
server closed it before reading the request). A request cancelled or failed midway closes its connection, which is
how SGLang and vLLM learn that their client went away.

Failures are the built-in ones: `TimeoutError`, `OSError` (refused, reset, closed), `asyncio.IncompleteReadError`,
`HttpProtocolError` for a reply that is not HTTP/1.1; the engine client maps them to Engine*Errors.

Imports nothing from tito.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Mapping
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
            connection = self._take_idle()
            if connection is not None:
                try:
                    return await self._exchange(connection, head, body)
                except _ClosedBeforeReply:
                    pass  # the server closed the idle connection first: it never read the request; send it anew
            connection = await self._connect()
            try:
                return await self._exchange(connection, head, body)
            except _ClosedBeforeReply as exc:
                raise ConnectionResetError("the engine closed the connection before replying") from exc

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

    async def _exchange(self, connection: _Connection, head: bytes, body: bytes) -> HttpReply:
        """One request and its reply on `connection`; the connection goes back to the pool only after a whole reply
        that leaves it open, and is closed on any failure or cancellation."""
        kept = False
        try:
            writer = connection.writer
            writer.write(head)
            if body:
                writer.write(body)
            try:
                await writer.drain()
                status_line = await connection.reader.readuntil(b"\r\n")
            except (ConnectionError, asyncio.IncompleteReadError) as exc:
                raise _ClosedBeforeReply from exc
            except asyncio.LimitOverrunError:
                raise HttpProtocolError(f"a status line longer than {MAX_HEAD_BYTES} bytes") from None
            reply, kept = await _read_reply(connection.reader, status_line)
            return reply
        finally:
            if kept and len(self._idle) < self.max_idle:
                connection.idle_since = time.monotonic()
                self._idle.append(connection)
            else:
                connection.close()


class _ClosedBeforeReply(Exception):
    """The connection ended before the first byte of a reply."""


async def _read_reply(reader: asyncio.StreamReader, status_line: bytes) -> tuple[HttpReply, bool]:
    """The reply after its status line, and whether the connection stays open for another request."""
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
    keep_alive = version == b"HTTP/1.1" and headers.get("connection", "").lower() != "close"
    if status in (204, 304) or 100 <= status < 200:
        return HttpReply(status, headers, b""), keep_alive
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return HttpReply(status, headers, await _read_chunks(reader)), keep_alive
    length = headers.get("content-length")
    if length is not None:
        if not length.isdigit():
            raise HttpProtocolError(f"content-length {length!r} is not a number")
        return HttpReply(status, headers, await reader.readexactly(int(length))), keep_alive
    return HttpReply(status, headers, await reader.read()), False  # the body runs to the end of the connection


async def _read_chunks(reader: asyncio.StreamReader) -> bytes:
    body = bytearray()
    while True:
        size_line = await reader.readuntil(b"\r\n")
        try:
            size = int(size_line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise HttpProtocolError(f"a malformed chunk size: {size_line[:100]!r}") from None
        if size == 0:
            with contextlib.suppress(asyncio.IncompleteReadError):
                while await reader.readuntil(b"\r\n") != b"\r\n":
                    pass  # trailers
            return bytes(body)
        body += await reader.readexactly(size + 2)
        del body[-2:]
