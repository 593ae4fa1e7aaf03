"""The access log: one structured line per request (session, route, status, prompt/output ids, engine time, tito
time, time waiting on the client), errors included, on the `tito.access` logger at INFO.

A pure ASGI middleware times the request and reads the status it sends; a turn's ids and engine time come from
`note_turn`, which the turn's code calls (through `ServerMetrics.observe_turn`) inside the request's context.
With INFO off for `tito.access` it only passes the request through. `tito serve` has the lines written straight to
its stderr (`DirectLines`), in the same format as its logging lines but without building a LogRecord and passing
it through handlers and a formatter per request; an app embedded elsewhere logs them through `logging`.

What the times are, in wall time from the request's first event to its reply's last byte:
- `engine_ms`: waiting on the engine (a whole reply: the call, with tito's writing of the request's JSON and reading
  of the reply, about 0.3 ms at 32k tokens; a stream: the waits for each of its chunks, so the work tito does on each
  chunk is not in it);
- `wait_ms`: waiting on the client: for the request body to arrive (an agent writing a large body on a busy
  machine takes milliseconds) and for the client to take the reply (a stream's backpressure);
- `tito_ms`: the rest: tito's own work, and whatever kept it from running (another process holding the CPU on a
  shared machine, other requests on the event loop under load). One request at a time on an idle machine it is
  tito's CPU time (benchmarks/turn_cpu.py prints both, with the time spent waiting for a CPU).

Imports nothing from tito.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import re
import time
from dataclasses import dataclass

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.types import Message as AsgiMessage  # an ASGI event, not a chat message (tito.chat_message)

logger = logging.getLogger("tito.access")

_SESSION_PATH = re.compile(r"^/sessions/([^/]+)")


class DirectLines:
    """Access lines written as `prefix` + JSON + newline to the file descriptor `fd`, not through `logging`; whether
    to write one is still the `tito.access` logger's level. The lines of the requests that end in one turn of the
    event loop leave in one `os.write`, once that turn's callbacks have run: under load a few requests end at once,
    and each write to a pipe wakes its reader (a syscall and a wake-up a request fewer, and no line waits longer than
    the loop's current turn)."""

    def __init__(self, fd: int, prefix: bytes) -> None:
        self.fd = fd
        self.prefix = prefix
        self._pending: list[bytes] = []

    def write(self, line: bytes) -> None:
        self._pending.append(self.prefix + line + b"\n")
        if len(self._pending) == 1:
            try:
                asyncio.get_running_loop().call_soon(self._flush)
            except RuntimeError:  # no loop running: nothing to share the write with
                self._flush()

    def _flush(self) -> None:
        data = memoryview(b"".join(self._pending))
        self._pending.clear()
        while data:  # a blocking write to a pipe takes it all, unless a signal cuts it short
            data = data[os.write(self.fd, data) :]


@dataclass
class TurnFacts:
    prompt_tokens: int
    output_tokens: int
    engine_seconds: float


_current: contextvars.ContextVar[list[TurnFacts] | None] = contextvars.ContextVar("tito_access_turn", default=None)


def note_turn(prompt_tokens: int, output_tokens: int, engine_seconds: float) -> None:
    """Record the turn of the request being served (a no-op outside a logged request)."""
    turns = _current.get()
    if turns is not None:
        turns.append(TurnFacts(prompt_tokens, output_tokens, engine_seconds))


def access_line(
    method: str, path: str, status: int, seconds: float, turn: TurnFacts | None, waiting: float = 0.0
) -> dict[str, object]:
    """The logged fields; the route names a session path with `{id}`, the session id goes in its own field."""
    match = _SESSION_PATH.match(path)
    session = match.group(1) if match else None
    route = f"/sessions/{{id}}{path[match.end() :]}" if match else path
    engine = turn.engine_seconds if turn is not None else 0.0
    return {
        "session": session,
        "method": method,
        "route": route,
        "status": status,
        "prompt_tokens": turn.prompt_tokens if turn is not None else None,
        "output_tokens": turn.output_tokens if turn is not None else None,
        "engine_ms": round(engine * 1000, 3) if turn is not None else None,
        "tito_ms": round((seconds - engine - waiting) * 1000, 3),
        "wait_ms": round(waiting * 1000, 3),
    }


class AccessLogMiddleware:
    """Logs one line per HTTP request once its reply has been sent (a streamed reply: once the stream ended)."""

    def __init__(self, app: ASGIApp, direct: DirectLines | None = None) -> None:
        self.app = app
        self.direct = direct

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not logger.isEnabledFor(logging.INFO):
            await self.app(scope, receive, send)
            return
        started = time.monotonic()
        status = 500  # what the client gets when the app raises before replying
        waiting = 0.0
        body_read = False
        turns: list[TurnFacts] = []
        token = _current.set(turns)

        async def receive_timed() -> AsgiMessage:
            """Times the waits for the body; once it is read, a receive only watches for a disconnect (during
            the engine call), which is no waiting on the client."""
            nonlocal waiting, body_read
            if body_read:
                return await receive()
            waited = time.monotonic()
            message = await receive()
            waiting += time.monotonic() - waited
            body_read = message["type"] != "http.request" or not message.get("more_body", False)
            return message

        async def send_timed(message: AsgiMessage) -> None:
            nonlocal status, waiting
            if message["type"] == "http.response.start":
                status = int(message["status"])
            waited = time.monotonic()
            await send(message)
            waiting += time.monotonic() - waited

        try:
            await self.app(scope, receive_timed, send_timed)
        finally:
            _current.reset(token)
            seconds = time.monotonic() - started
            turn = turns[0] if turns else None
            line = orjson.dumps(access_line(scope["method"], scope["path"], status, seconds, turn, waiting))
            if self.direct is None:
                logger.info(line.decode())
            else:
                self.direct.write(line)
