"""Aborts a turn's engine request once its reply can no longer be delivered or recorded.

The client disconnected, the session was deleted, or (streaming) the engine ran past `--engine-timeout`: the
watch calls `engine.abort(request_id)` once and remembers why. The engine call then ends with finish ABORT, the
turn commits nothing, and the error that leaves names the reason. One mechanism for the whole-reply and the
streaming paths.

Imports from tito: engines.protocol, errors, server.errors, server.sessions.registry.
"""

from __future__ import annotations

import asyncio
import enum
from types import TracebackType

from starlette.types import Receive

from tito.engines.protocol import Engine
from tito.errors import EngineTimeoutError, TitoError
from tito.server.errors import ClientDisconnectedError, SessionGoneError
from tito.server.sessions.registry import Session


class AbortReason(enum.Enum):
    CLIENT_DISCONNECTED = "client_disconnected"
    SESSION_DELETED = "session_deleted"
    TIMEOUT = "timeout"


class TurnWatch:
    """`async with TurnWatch(...) as watch:` around an engine call; an error raised inside the block after the
    watch aborted the request leaves as the error of the reason (`watch.error()`).

    One task per turn, the one waiting for the client's disconnect (the ASGI `receive` can only be awaited); the
    deletion and the timeout are callbacks (the session's `deletion_callbacks`, a loop timer), so a turn that ends
    normally costs one task started and cancelled. The first reason wins and starts the one abort."""

    def __init__(
        self, engine: Engine, request_id: str, session: Session, receive: Receive, timeout: float | None = None
    ) -> None:
        self.engine = engine
        self.request_id = request_id
        self.session = session
        self.receive = receive
        self.timeout = timeout
        self.reason: AbortReason | None = None
        self._client: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._aborting: asyncio.Task[None] | None = None

    async def __aenter__(self) -> TurnWatch:
        loop = asyncio.get_running_loop()
        self._client = loop.create_task(self._client_disconnected())
        if self.timeout is not None:
            self._timer = loop.call_later(self.timeout, self._abort, AbortReason.TIMEOUT)
        if self.session.deleted:
            self._abort(AbortReason.SESSION_DELETED)
        else:
            self.session.deletion_callbacks.add(self._session_deleted)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.close()
        if self.reason is None and exc is not None and not isinstance(exc, Exception):
            self.reason = AbortReason.CLIENT_DISCONNECTED  # the consumer was closed or cancelled: no one listens
            await self.engine.abort(self.request_id)
        if self.reason is not None and isinstance(exc, TitoError):
            raise self.error() from exc

    async def close(self) -> None:
        """Stop watching (idempotent); an abort already started is sent to its end."""
        self._stop_watching()
        if self._aborting is not None:
            aborting, self._aborting = self._aborting, None
            await aborting

    def error(self) -> TitoError:
        """The error the turn ends with, by the reason of the abort."""
        session_id = self.session.session_id
        if self.reason is AbortReason.SESSION_DELETED:
            return SessionGoneError(f"session {session_id} was deleted during the turn; the turn was not recorded")
        if self.reason is AbortReason.TIMEOUT:
            return EngineTimeoutError(
                self.engine.info.name, f"no end within {self.timeout:g}s (tito serve --engine-timeout)"
            )
        return ClientDisconnectedError(f"the client of session {session_id} disconnected; the turn was not recorded")

    def _abort(self, reason: AbortReason) -> None:
        if self.reason is not None:
            return
        self.reason = reason
        self._stop_watching()
        self._aborting = asyncio.get_running_loop().create_task(self.engine.abort(self.request_id))

    def _session_deleted(self) -> None:
        self._abort(AbortReason.SESSION_DELETED)

    def _stop_watching(self) -> None:
        self.session.deletion_callbacks.discard(self._session_deleted)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._client is not None:
            if self._client is not asyncio.current_task():
                self._client.cancel()  # it ends at once: `receive` holds nothing to clean up
            self._client = None

    async def _client_disconnected(self) -> None:
        """Aborts when the client goes away (the request body was already read: only `http.disconnect` is left)."""
        while (await self.receive())["type"] != "http.disconnect":
            pass
        self._abort(AbortReason.CLIENT_DISCONNECTED)
