"""The access log: one structured line per request (session, route, status, prompt/output ids, engine time, tito
time), errors included, on the `tito.access` logger at INFO.

A pure ASGI middleware times the request and reads the status it sends; a turn's ids and engine time come from
`note_turn`, which the turn's code calls (through `ServerMetrics.observe_turn`) inside the request's context.
With INFO off for `tito.access` it only passes the request through.

Imports nothing from tito.
"""

from __future__ import annotations

import contextvars
import logging
import re
import time
from dataclasses import dataclass

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.types import Message as AsgiMessage  # an ASGI event, not a chat message (tito.chat_message)

logger = logging.getLogger("tito.access")

_SESSION_PATH = re.compile(r"^/sessions/([^/]+)")


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


def access_line(method: str, path: str, status: int, seconds: float, turn: TurnFacts | None) -> dict[str, object]:
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
        "tito_ms": round((seconds - engine) * 1000, 3),
    }


class AccessLogMiddleware:
    """Logs one line per HTTP request once its reply has been sent (a streamed reply: once the stream ended)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not logger.isEnabledFor(logging.INFO):
            await self.app(scope, receive, send)
            return
        started = time.monotonic()
        status = 500  # what the client gets when the app raises before replying
        turns: list[TurnFacts] = []
        token = _current.set(turns)

        async def send_noting_status(message: AsgiMessage) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_noting_status)
        finally:
            _current.reset(token)
            seconds = time.monotonic() - started
            line = access_line(scope["method"], scope["path"], status, seconds, turns[0] if turns else None)
            logger.info(orjson.dumps(line).decode())
