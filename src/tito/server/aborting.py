"""Aborts a turn's engine request once its reply can no longer be delivered or recorded.

The client disconnected, the session was deleted, or (streaming) the engine ran past `--engine-timeout`: the
watch calls `engine.abort(request_id)` once and remembers why. The engine call then ends with finish ABORT, the
turn commits nothing, and the error that leaves names the reason. One mechanism for the whole-reply and the
streaming paths.

Imports from tito: engines.protocol, errors, server.errors, server.sessions.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from types import TracebackType

from starlette.types import Receive

from tito.engines.protocol import Engine
from tito.errors import EngineTimeoutError, TitoError
from tito.server.errors import ClientDisconnectedError, SessionGoneError
from tito.server.sessions import Session


class AbortReason(enum.Enum):
    CLIENT_DISCONNECTED = "client_disconnected"
    SESSION_DELETED = "session_deleted"
    TIMEOUT = "timeout"


class TurnWatch:
    """`async with TurnWatch(...) as watch:` around an engine call; an error raised inside the block after the
    watch aborted the request leaves as the error of the reason (`watch.error()`)."""

    def __init__(
        self, engine: Engine, request_id: str, session: Session, receive: Receive, timeout: float | None = None
    ) -> None:
        self.engine = engine
        self.request_id = request_id
        self.session = session
        self.receive = receive
        self.timeout = timeout
        self.reason: AbortReason | None = None
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> TurnWatch:
        self._task = asyncio.create_task(self._watch())
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
        """Stop watching (idempotent); an abort already sent stays sent."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

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

    async def _watch(self) -> None:
        waits = {
            asyncio.create_task(self._disconnected()): AbortReason.CLIENT_DISCONNECTED,
            asyncio.create_task(self.session.deleted.wait()): AbortReason.SESSION_DELETED,
        }
        try:
            done, _ = await asyncio.wait(waits, timeout=self.timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waits:
                task.cancel()
        self.reason = waits[next(iter(done))] if done else AbortReason.TIMEOUT
        await self.engine.abort(self.request_id)

    async def _disconnected(self) -> None:
        """Returns when the client goes away (the request body was already read: only `http.disconnect` is left)."""
        while (await self.receive())["type"] != "http.disconnect":
            pass
