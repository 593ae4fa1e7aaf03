"""TurnWatch: the one mechanism that aborts a turn's engine request, and the error the turn then ends with."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tito.engines.instant import InstantEngine
from tito.errors import EngineResponseError, EngineTimeoutError, TitoError
from tito.server.errors import ClientDisconnectedError, SessionGoneError
from tito.server.sessions.registry import SessionRegistry
from tito.server.turns.aborting import AbortReason, TurnWatch
from tito.trajectory.events import SessionConfig


class RecordingEngine(InstantEngine):
    def __init__(self) -> None:
        super().__init__([1])
        self.aborted: list[str] = []

    async def abort(self, request_id: str) -> None:
        self.aborted.append(request_id)


class Client:
    """An ASGI receive whose client hangs up when told to."""

    def __init__(self) -> None:
        self.gone = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        await self.gone.wait()
        return {"type": "http.disconnect"}


async def watched_turn(
    trigger: str, timeout: float | None = None
) -> tuple[TurnWatch, RecordingEngine, BaseException | None]:
    """Run a turn that waits until aborted (then fails as an engine does), firing `trigger` meanwhile."""
    registry = SessionRegistry()
    session = await registry.create(SessionConfig())
    engine, client = RecordingEngine(), Client()
    watch = TurnWatch(engine, "req-1", session, client.receive, timeout)
    raised: BaseException | None = None
    try:
        async with watch:
            if trigger == "disconnect":
                client.gone.set()
            elif trigger == "delete":
                await registry.delete(session.session_id)
            for _ in range(200):
                if engine.aborted:
                    raise EngineResponseError("instant", "the engine aborted the generation")
                await asyncio.sleep(0.005)
    except TitoError as exc:
        raised = exc
    return watch, engine, raised


@pytest.mark.parametrize(("trigger", "timeout", "reason", "error"), [
    ("disconnect", None, AbortReason.CLIENT_DISCONNECTED, ClientDisconnectedError),
    ("delete", None, AbortReason.SESSION_DELETED, SessionGoneError),
    ("nothing", 0.05, AbortReason.TIMEOUT, EngineTimeoutError),
])  # fmt: skip
def test_each_reason_aborts_the_request_once_and_names_itself_in_the_error(
    trigger: str, timeout: float | None, reason: AbortReason, error: type[Exception]
) -> None:
    watch, engine, raised = asyncio.run(watched_turn(trigger, timeout))
    assert engine.aborted == ["req-1"]
    assert watch.reason is reason
    assert type(raised) is error and isinstance(raised.__cause__, EngineResponseError)


def test_a_turn_that_ends_normally_aborts_nothing() -> None:
    async def turn() -> tuple[TurnWatch, RecordingEngine]:
        session = await SessionRegistry().create(SessionConfig())
        engine = RecordingEngine()
        async with TurnWatch(engine, "req-1", session, Client().receive, timeout=10) as watch:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.01)
        return watch, engine

    watch, engine = asyncio.run(turn())
    assert (watch.reason, engine.aborted) == (None, [])


def test_a_consumer_that_closes_the_stream_aborts_the_request() -> None:
    async def turn() -> RecordingEngine:
        session = await SessionRegistry().create(SessionConfig())
        engine = RecordingEngine()

        async def events() -> Any:
            async with TurnWatch(engine, "req-1", session, Client().receive):
                yield b"first"
                yield b"never sent"

        stream = events()
        assert await stream.__anext__() == b"first"
        await stream.aclose()  # what the SSE response does when the client goes away mid-send
        return engine

    assert asyncio.run(turn()).aborted == ["req-1"]


def test_a_watch_runs_one_task_and_leaves_nothing_behind() -> None:
    async def turn() -> tuple[int, int, TurnWatch]:
        session = await SessionRegistry().create(SessionConfig())
        before = len(asyncio.all_tasks())
        async with TurnWatch(RecordingEngine(), "req-1", session, Client().receive, timeout=10) as watch:
            during = len(asyncio.all_tasks())
            assert session.deletion_callbacks
        await asyncio.sleep(0)  # the cancelled disconnect task ends
        assert len(asyncio.all_tasks()) == before
        assert not session.deletion_callbacks
        return before, during, watch

    before, during, watch = asyncio.run(turn())
    assert during == before + 1
    assert watch.reason is None


def test_a_session_deleted_before_the_watch_starts_aborts_at_once() -> None:
    async def turn() -> tuple[TurnWatch, RecordingEngine]:
        registry = SessionRegistry()
        session = await registry.create(SessionConfig())
        await registry.delete(session.session_id)
        engine = RecordingEngine()
        async with TurnWatch(engine, "req-1", session, Client().receive) as watch:
            await asyncio.sleep(0.01)
        return watch, engine

    watch, engine = asyncio.run(turn())
    assert (watch.reason, engine.aborted) == (AbortReason.SESSION_DELETED, ["req-1"])
