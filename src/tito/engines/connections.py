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

Each connection is an `asyncio.Protocol` (`_Connection`), not a StreamReader/StreamWriter pair: the event loop's
callbacks add the bytes received to one buffer and wake the one waiting request only when what it waits for is all
there (a reply's head; for a whole reply its sized body too), so a reply that arrives in several reads still costs
one wake-up, one head parse and one copy of its body; the deadlines of a pool's waits share one timer
(`_Deadlines`). Writes follow the transport's flow control (a request waits while the transport's buffer is over its
high-water mark), and reading pauses while more than `2 * MAX_HEAD_BYTES` unread bytes wait for a reader (a slow
stream consumer).

Failures are the built-in ones: `TimeoutError`, `OSError` (refused, reset, closed), `asyncio.IncompleteReadError`,
`HttpProtocolError` for a reply that is not HTTP/1.1; the engine client maps them to Engine*Errors.

Imports nothing from tito.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

MAX_HEAD_BYTES = 64 * 1024
"""The longest reply head (status line and headers) read."""
_READ_LIMIT = 2 * MAX_HEAD_BYTES
"""Unread bytes past which a connection stops reading from its socket until a reader waits or takes them."""


Body = Sequence[bytes | memoryview]
"""A request body in pieces (bytes, or byte views of them), written to the socket as they are: a large body is
never joined into one more copy."""


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


_CHUNKED = -1
_TO_CLOSE = -2

_UNTIL_HEAD = -1
"""`_Connection.wait`: until the reply's head was read (a whole reply's: and its sized body)."""
_UNTIL_DRAINED = -2
"""`_Connection.wait`: until the transport takes writes again."""
_UNTIL_END = sys.maxsize
"""`_Connection.wait`: until the connection ends."""
_UNTIL_LAST_CHUNK = -3
"""`_Connection.gather_until`: until the buffer ends with a chunked body's last chunk, or holds `_READ_LIMIT` bytes."""
_LAST_CHUNK = b"0\r\n\r\n"
"""A chunked body's last chunk (without trailers)."""


class _Head:
    """A reply's status line and headers (lower-cased names), whether the connection stays open after the body,
    and how the body ends (`_body_end`)."""

    __slots__ = ("body_end", "headers", "keep_alive", "status")

    def __init__(self, raw: bytes) -> None:
        line_end = raw.find(b"\r\n") + 2
        status_line = raw[:line_end]
        try:
            version, status_text = status_line.split(b" ", 2)[:2]
            status = int(status_text)
        except ValueError:
            raise HttpProtocolError(f"not an HTTP status line: {status_line[:100]!r}") from None
        if not version.startswith(b"HTTP/1."):
            raise HttpProtocolError(f"not an HTTP/1.x reply: {status_line[:100]!r}")
        headers: dict[str, str] = {}
        for line in raw[line_end:].decode("latin-1").split("\r\n"):
            if line:
                name, separator, value = line.partition(":")
                if not separator:
                    raise HttpProtocolError(f"a malformed reply header: {line[:100].encode('latin-1')!r}")
                headers[name.strip(_SPACE).lower()] = value.strip(_SPACE)
        self.status = status
        self.headers = headers
        self.keep_alive = version == b"HTTP/1.1" and headers.get("connection", "").lower() != "close"
        self.body_end = _body_end(status, headers)


_SPACE = " \t\n\r\x0b\x0c"
"""What `bytes.strip` strips (`str.strip` strips more: latin-1's \\x85 and \\xa0)."""


class _Connection(asyncio.Protocol):
    """One connection: the event loop's callbacks add what arrives to `buffer` and wake the one waiting request
    (`wait`) only when what it waits for is there, or the connection ended (`ended`; `error` why, when it was lost
    to an error)."""

    transport: asyncio.Transport

    def __init__(self, deadlines: _Deadlines) -> None:
        self.buffer = bytearray()
        self.head: _Head | None = None
        """The reply's head once read, from the request `exchange` sent."""
        self.ended = False
        self.error: Exception | None = None
        self.idle_since = 0.0
        self.deadline = 0.0
        """When the wait under way times out (if it has a limit: then it is among `_deadlines.waiting`)."""
        self.loop = asyncio.get_running_loop()
        self._deadlines = deadlines
        self._whole = False
        self._until = 0
        self._scanned = 0
        """Where the search for the head's end goes on (the bytes before hold no `\\r\\n\\r\\n`)."""
        self._waiter: asyncio.Future[None] | None = None
        self._writing_paused = False
        self._reading_paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not asyncio.Transport's

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            self._wake_if_ready(waiter)
        elif len(self.buffer) > _READ_LIMIT and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()

    def eof_received(self) -> None:
        """Closes the transport (a reply's end of stream leaves nothing to send)."""
        self.ended = True
        if self._waiter is not None and not self._waiter.done():
            self._wake_if_ready(self._waiter)

    def connection_lost(self, exc: Exception | None) -> None:
        self.ended = True
        self.error = exc
        if self._waiter is not None and not self._waiter.done():
            self._wake_if_ready(self._waiter)

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        if self._waiter is not None and not self._waiter.done():
            self._wake_if_ready(self._waiter)

    def usable(self, expiry: float) -> bool:
        """Open, nothing unasked-for received, and idle for less than `expiry` seconds."""
        return (
            not self.ended and not self.buffer and not self.transport.is_closing()
            and time.monotonic() - self.idle_since < expiry
        )  # fmt: skip

    def close(self) -> None:
        self.transport.close()

    async def exchange(self, head: bytes, body: Body, whole: bool, deadline: float) -> None:
        """Send a request (its head and its body's pieces, in one write) and wait for its reply's head (`whole`: and
        for its sized body), at most until `deadline` (the loop's time); `_ClosedBeforeReply` when the connection
        ends first. Any failure or cancellation closes the connection."""
        self.head = None
        self._whole = whole
        self._scanned = 0
        try:
            self.transport.writelines((head, *body))
            if self._writing_paused:
                await self.wait(_UNTIL_DRAINED, deadline)
            await self.wait(_UNTIL_HEAD, deadline)
            if self.head is None:
                self._head_at_end()
        except BaseException:
            self.close()
            raise

    async def wait(self, until: int, deadline: float | None) -> None:
        """Until the buffer holds `until` bytes (or `_UNTIL_HEAD`, `_UNTIL_DRAINED`, `_UNTIL_END`) or the connection
        ended; `TimeoutError` at `deadline` (the loop's time; None: no limit)."""
        waiter = self._waiter_for(until)
        if waiter is None:
            return
        if deadline is not None:
            self.deadline = deadline
            self._deadlines.watch(self)
        try:
            await waiter
        finally:
            self._waiter = None
            if deadline is not None:
                self._deadlines.waiting.discard(self)

    async def gather_until(self, when: float) -> None:
        """Let what arrives gather in the buffer until the loop's time `when`: sooner once the buffer ends with a
        chunked body's last chunk (a stream's end is never held back) or holds `_READ_LIMIT` bytes, or the
        connection ended. Each arrival only appends to the buffer and checks its end; nothing is parsed."""
        waiter = self._waiter_for(_UNTIL_LAST_CHUNK)
        if waiter is None:
            return
        timer = self.loop.call_at(when, _settle, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None

    def _waiter_for(self, until: int) -> asyncio.Future[None] | None:
        """The future a wait for `until` awaits (`data_received` and the connection's end settle it once `_ready`),
        reading resumed if it was paused; None when what it waits for is already there."""
        self._until = until
        if self._ready():
            return None
        if self._reading_paused:
            self._reading_paused = False
            self.transport.resume_reading()
        waiter = self._waiter = self.loop.create_future()
        return waiter

    def take(self, count: int) -> bytes:
        """The first `count` bytes received, taken out of the buffer."""
        buffer = self.buffer
        taken = bytes(buffer) if count == len(buffer) else bytes(buffer[:count])
        self.discard(count)
        return taken

    def discard(self, count: int) -> None:
        """Drop the first `count` bytes received (read), and read on if that was paused."""
        del self.buffer[:count]
        if self._reading_paused:
            self._reading_paused = False
            self.transport.resume_reading()

    def expire(self) -> None:
        """Time the wait under way out."""
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(TimeoutError())

    def _wake_if_ready(self, waiter: asyncio.Future[None]) -> None:
        try:
            if self._ready():
                waiter.set_result(None)
        except HttpProtocolError as exc:
            waiter.set_exception(exc)

    def _ready(self) -> bool:
        """Whether the waiting request has what it waits for, or the connection ended; reads the reply's head once
        it is whole (then a whole reply waits on for its sized body)."""
        until = self._until
        if until < 0:
            if until == _UNTIL_DRAINED:
                return self.ended or not self._writing_paused
            if until == _UNTIL_LAST_CHUNK:
                buffer = self.buffer
                return self.ended or len(buffer) >= _READ_LIMIT or buffer.endswith(_LAST_CHUNK)
            if not self._read_head():
                return self.ended
            until = self._until
        return self.ended or len(self.buffer) >= until

    def _read_head(self) -> bool:
        """Whether the head is whole; then it is parsed into `head`, taken out of the buffer, and `_until` is what
        the request waits for after it (a whole reply's sized body, else nothing)."""
        buffer = self.buffer
        end = buffer.find(b"\r\n\r\n", self._scanned)
        if end < 0 or end > MAX_HEAD_BYTES:
            if len(buffer) > MAX_HEAD_BYTES:
                if buffer.find(b"\r\n", 0, MAX_HEAD_BYTES) < 0:
                    raise HttpProtocolError(f"a status line longer than {MAX_HEAD_BYTES} bytes")
                raise HttpProtocolError(f"reply headers longer than {MAX_HEAD_BYTES} bytes")
            self._scanned = max(len(buffer) - 3, 0)
            return False
        self.head = head = _Head(bytes(buffer[: end + 2]))
        del buffer[: end + 4]
        self._until = head.body_end if self._whole and head.body_end > 0 else 0
        return True

    def _head_at_end(self) -> None:
        """The connection ended before the reply's head did: `_ClosedBeforeReply` (from the reset, if it was one)
        when no status line came; else the head is what came (the headers cut short)."""
        error = self.error
        if error is not None and not isinstance(error, ConnectionError):
            raise error
        if error is not None or b"\r\n" not in self.buffer:
            raise _ClosedBeforeReply from error
        self.head = _Head(self.take(len(self.buffer)))


class _Deadlines:
    """The waits with a time limit on one pool's connections, and one timer for them all, due at or before the
    earliest deadline: nearly every wait ends long before its deadline, and a timer per wait (what asyncio.timeout
    arms) costs more than its call and its cancel: uvloop closes a cancelled timer's handle in one more turn of the
    event loop. The deadlines of one pool come in order (each `timeout` after its wait began), so a timer is armed
    once per `timeout` seconds, not once per wait."""

    def __init__(self) -> None:
        self.waiting: set[_Connection] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._due = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None

    def watch(self, connection: _Connection) -> None:
        self.waiting.add(connection)
        if self._timer is None or connection.deadline < self._due or connection.loop is not self._loop:
            if self._timer is not None and connection.loop is self._loop:
                self._timer.cancel()
            self._arm(connection.loop, connection.deadline)

    def _arm(self, loop: asyncio.AbstractEventLoop, due: float) -> None:
        self._loop = loop
        self._due = due
        self._timer = loop.call_at(due, self._expire, loop)

    def _expire(self, loop: asyncio.AbstractEventLoop) -> None:
        """Time out the waits due by now (the loop may run a timer a clock tick early), and arm the timer for the
        earliest of the others."""
        if loop is not self._loop:
            return  # a timer of an event loop the pool has left
        self._timer = None
        due = max(loop.time(), self._due)
        earliest = None
        for connection in list(self.waiting):
            if connection.deadline <= due:
                self.waiting.discard(connection)
                connection.expire()
            elif earliest is None or connection.deadline < earliest:
                earliest = connection.deadline
        if earliest is not None:
            self._arm(loop, earliest)


class ConnectionPool:
    """Kept-alive HTTP/1.1 connections to one `host:port`; any number open at once, `max_idle` kept between calls."""

    def __init__(
        self, host: str, port: int, *, timeout: float, connect_timeout: float, keepalive_expiry: float = 4.0,
        max_idle: int = 1024, stream_interval: float = 0.0,
    ) -> None:  # fmt: skip
        self.host = host
        self.port = port
        self.timeout = timeout
        self.stream_interval = stream_interval
        """A streamed chunked body is handed on at most once per this many seconds (0: as it arrives)."""
        self.connect_timeout = connect_timeout
        self.keepalive_expiry = keepalive_expiry
        """Below uvicorn's default keep-alive timeout (5 s), which SGLang and vLLM servers run with."""
        self.max_idle = max_idle
        self._idle: deque[_Connection] = deque()
        self._deadlines = _Deadlines()
        self._host_header = f"host: {host}:{port}\r\n"

    async def request(self, method: str, path: str, body: Body, headers: Mapping[str, str]) -> HttpReply:
        """Send one request and read its whole reply within `timeout` seconds."""
        head = self._head(method, path, sum(map(len, body)), headers)
        deadline = asyncio.get_running_loop().time() + self.timeout
        connection = await self._send(head, body, True, deadline)
        kept = False
        try:
            reply = connection.head
            assert reply is not None
            body_end = reply.body_end
            if body_end >= 0:
                content = _sized_body(connection, body_end)
            else:
                async with asyncio.timeout_at(deadline):
                    content = await (_read_chunks(connection) if body_end == _CHUNKED else _read_to_end(connection))
            kept = reply.keep_alive and body_end != _TO_CLOSE
            return HttpReply(reply.status, reply.headers, content)
        finally:
            self._release(connection, kept)

    def stream(self, method: str, path: str, body: Body, headers: Mapping[str, str]) -> _Streaming:
        """`async with pool.stream(...) as reply:` sends one request and gives its reply with the body still to read;
        leaving the block before the body's end (or on any failure) closes the connection."""
        return _Streaming(self, self._head(method, path, sum(map(len, body)), headers), body)

    async def aclose(self) -> None:
        while self._idle:
            self._idle.pop().close()

    def _head(self, method: str, path: str, length: int, headers: Mapping[str, str]) -> bytes:
        lines = "".join([f"{name}: {value}\r\n" for name, value in headers.items()])
        if lines.count("\n") != len(headers) or lines.count("\r") != len(headers):
            raise ValueError(f"a header of {path} holds a line break: {dict(headers)!r}")
        return f"{method} {path} HTTP/1.1\r\n{self._host_header}content-length: {length}\r\n{lines}\r\n".encode()

    def _take_idle(self) -> _Connection | None:
        while self._idle:
            connection = self._idle.pop()
            if connection.usable(self.keepalive_expiry):
                return connection
            connection.close()
        return None

    async def _connect(self, deadline: float) -> _Connection:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout_at(min(deadline, loop.time() + self.connect_timeout)):
            _, connection = await loop.create_connection(lambda: _Connection(self._deadlines), self.host, self.port)
        return connection

    async def _send(self, head: bytes, body: Body, whole: bool, deadline: float) -> _Connection:
        """Send the request on an idle connection, or a new one, and wait for the reply's head (`whole`: and its
        sized body) until `deadline`. The caller releases the connection (`_release`: back to the pool only after
        a whole reply that leaves it open)."""
        connection = self._take_idle()
        if connection is not None:
            try:
                await connection.exchange(head, body, whole, deadline)
                return connection
            except _ClosedBeforeReply as exc:
                if not isinstance(exc.__cause__, ConnectionError):
                    raise ConnectionResetError(
                        "the engine closed a reused connection before replying; it may have read the request, so it "
                        "is not sent again"
                    ) from exc
                # reset: the server never read the whole request (see the module docstring); send it anew
        connection = await self._connect(deadline)
        try:
            await connection.exchange(head, body, whole, deadline)
            return connection
        except _ClosedBeforeReply as exc:
            raise ConnectionResetError("the engine closed the connection before replying") from exc

    def _release(self, connection: _Connection, reusable: bool) -> None:
        """Back to the idle connections when the reply left it open and was read whole; else closed."""
        if reusable and len(self._idle) < self.max_idle:
            connection.idle_since = time.monotonic()
            self._idle.append(connection)
        else:
            connection.close()


class _Streaming:
    """`ConnectionPool.stream`'s block, a class rather than a generator-based context manager: a streamed turn
    enters one, and a generator's frame, its first-iteration hook and its close cost ~3 us more each time."""

    __slots__ = ("_body", "_connection", "_head", "_pieces", "_pool", "_reply")

    def __init__(self, pool: ConnectionPool, head: bytes, body: Body) -> None:
        self._pool = pool
        self._head = head
        self._body = body
        self._connection: _Connection | None = None
        self._reply: _Head | None = None
        self._pieces: _BodyPieces | None = None

    async def __aenter__(self) -> StreamedReply:
        pool = self._pool
        deadline = asyncio.get_running_loop().time() + pool.timeout
        connection = self._connection = await pool._send(self._head, self._body, False, deadline)
        reply = self._reply = connection.head
        assert reply is not None
        self._pieces = _BodyPieces(connection, reply.body_end, pool.timeout, pool.stream_interval)
        return StreamedReply(reply.status, reply.headers, self._pieces)

    async def __aexit__(self, *exc_info: object) -> None:
        """The connection back to the pool when the body was read to its end and the reply leaves it open."""
        connection, reply, pieces = self._connection, self._reply, self._pieces
        assert connection is not None and reply is not None and pieces is not None
        self._pool._release(connection, pieces.ended and reply.keep_alive and reply.body_end != _TO_CLOSE)


class _ClosedBeforeReply(Exception):
    """The connection ended before the first byte of a reply."""


def _settle(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


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


def _sized_body(connection: _Connection, length: int) -> bytes:
    """A whole reply's body of `length` bytes, all received (`exchange` waited for it) unless the connection ended."""
    if len(connection.buffer) < length:
        if connection.error is not None:
            raise connection.error
        raise asyncio.IncompleteReadError(bytes(connection.buffer), length)
    return connection.take(length) if length else b""


async def _read_to_end(connection: _Connection) -> bytes:
    await connection.wait(_UNTIL_END, None)
    if connection.error is not None:
        raise connection.error
    return connection.take(len(connection.buffer))


async def _read_chunks(connection: _Connection) -> bytes:
    return b"".join([piece async for piece in _BodyPieces(connection, _CHUNKED, None)])


class _BodyPieces:
    """A reply's body as it arrives, each wait for more at most `timeout` seconds (None: no limit): a chunked body's
    complete chunks received so far joined into one piece (a burst of SSE events is one piece, not one per event), a
    sized or read-to-close body's bytes as they come. The reading is done here, in `__anext__`, not in a stack of
    generators that each pass every piece on; `ended` once the body's end was read.

    With an `interval` (seconds), a chunked body's pieces after the first leave at most once per interval: what
    arrives in between gathers in the buffer and becomes one piece (an engine streaming id by id writes an event per
    id, and each piece costs its reader a parse, a parser feed, an encoding and a send to its client). The body's
    end leaves as soon as it arrives: each arrival in between only appends to the buffer and looks at its end. The
    gathering's timer starts with the first arrival after a piece, so events sparser than the interval (an engine
    asked for an event per several ids) each leave as they come, with no timer that wakes to nothing.
    (Pausing the reading instead saves the arrivals' wake-ups too, but holds a stream's end until the interval is
    over: up to an interval more per turn, benchmarks/RESULTS.md.)"""

    def __init__(self, connection: _Connection, body_end: int, timeout: float | None, interval: float = 0.0) -> None:
        self.connection = connection
        self.body_end = body_end
        self.timeout = timeout
        self.interval = interval
        self.ended = body_end == 0
        self._remaining = body_end
        self._next_at: float | None = None
        """When the next piece of a paced chunked body may leave (the loop's time)."""

    def __aiter__(self) -> _BodyPieces:
        return self

    async def __anext__(self) -> bytes:
        if self.ended:
            raise StopAsyncIteration
        if self.body_end == _CHUNKED:
            return await self._next_chunks()
        connection = self.connection
        if not connection.buffer:
            await connection.wait(1, self._deadline())
        received = len(connection.buffer)
        remaining = self._remaining
        if not received:  # the connection ended
            if connection.error is not None:
                raise connection.error
            if remaining > 0:
                raise asyncio.IncompleteReadError(b"", remaining)
            self.ended = True
            raise StopAsyncIteration
        if remaining < 0:
            return connection.take(received)
        piece = connection.take(min(remaining, received))
        self._remaining = remaining - len(piece)
        self.ended = self._remaining == 0
        return piece

    async def _next_chunks(self) -> bytes:
        connection = self.connection
        buffer = connection.buffer
        if self._next_at is not None and not connection.ended:
            if not buffer:  # nothing since the last piece: a timer now would wake to an empty buffer
                await connection.wait(1, self._deadline())
            if not connection.ended and connection.loop.time() < self._next_at:
                await connection.gather_until(self._next_at)
        while True:
            if buffer:
                data, consumed, ended = _complete_chunks(buffer)
                connection.discard(consumed)
                if ended:
                    if buffer:  # a server answering one request at a time sends nothing after the reply
                        raise HttpProtocolError(
                            f"{len(buffer)} bytes after the end of a chunked body: {bytes(buffer[:100])!r}"
                        )
                    self.ended = True
                    if not data:
                        raise StopAsyncIteration
                if data:
                    if self.interval:
                        self._next_at = connection.loop.time() + self.interval
                    return data
            if connection.ended:
                if connection.error is not None:
                    raise connection.error
                raise asyncio.IncompleteReadError(bytes(buffer), None)
            await connection.wait(len(buffer) + 1, self._deadline())

    def _deadline(self) -> float | None:
        return None if self.timeout is None else asyncio.get_running_loop().time() + self.timeout


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
