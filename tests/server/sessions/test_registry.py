"""The registry: every change is an event, the sink sees each one in order, and replay rebuilds the same state."""

from __future__ import annotations

import asyncio
from array import array

import pytest

from tito.server.errors import SessionGoneError, SessionNotFoundError
from tito.server.sessions.registry import SessionRegistry
from tito.trajectory.events import SessionConfig, SessionDeleted, SessionEvent, TrajectoryKind, TurnCommitted
from tito.trajectory.linear import LinearTrajectory, SessionMovedOnError


class ListSink:
    def __init__(self) -> None:
        self.events: list[SessionEvent] = []

    async def record(self, event: SessionEvent) -> None:
        self.events.append(event)


def turn(session_id: str, node_id: int, parent_id: int | None, kept: int, text: str) -> TurnCommitted:
    return TurnCommitted(
        session_id, node_id, parent_id, kept, ({"role": "user", "content": text},), None, array("i", [1, 2]),
        array("i", [3, 4]), array("f", [-0.5, -0.25]), {"role": "assistant", "content": "ok"}, "stop",
        f"chatcmpl-{node_id}", f"fp-{node_id}", {}, 0.0,
    )  # fmt: skip


async def drive(registry: SessionRegistry) -> str:
    session = await registry.create(SessionConfig())
    sid = session.session_id
    trajectory = session.trajectory
    for text, retry in [("a", False), ("b", False), ("b again", True)]:
        main = trajectory.conversations["c0"].trajectory if trajectory.conversations else None
        stored = [] if main is None else main.messages()  # type: ignore[union-attr]
        messages = [*(stored[:2] if retry else stored), {"role": "user", "content": text}]
        plan = trajectory.plan(messages, None, text, False)
        event = turn(sid, trajectory.store.next_node_id, plan.parent_id, len(plan.stored_ids), text)
        committed = await registry.commit(session, plan, event)  # recorded as built (ids in commit order)
        assert committed is not None and (committed.node_id, committed.output_ids) == (event.node_id, event.output_ids)
    await registry.samples_taken(session)
    return sid


def test_replaying_the_recorded_events_rebuilds_the_same_sessions() -> None:
    sink = ListSink()
    live = SessionRegistry(sink=sink)
    sid = asyncio.run(drive(live))
    kinds = [type(event).__name__ for event in sink.events]
    assert kinds == ["SessionCreated", "TurnCommitted", "TurnCommitted", "TurnCommitted", "SamplesTaken"]
    replayed = SessionRegistry()
    for event in sink.events:
        replayed.apply(event)
    a, b = (
        live.get(sid).trajectory.conversations["c0"].trajectory,
        replayed.get(sid).trajectory.conversations["c0"].trajectory,
    )
    assert isinstance(a, LinearTrajectory) and isinstance(b, LinearTrajectory)
    assert a.describe() == b.describe() and len(a.turns()) == 2
    assert a.messages() == b.messages()
    assert a.sample_sequences()[0].tokens == b.sample_sequences()[0].tokens


def test_a_plan_made_before_another_commit_of_its_conversation_is_refused() -> None:
    async def scenario() -> None:
        registry = SessionRegistry()
        session = await registry.create(SessionConfig())
        trajectory = session.trajectory
        opening = [{"role": "user", "content": "x"}]
        assert await registry.commit(
            session, trajectory.plan(opening, None, "a", False), turn(session.session_id, 0, None, 0, "x")
        )
        stored = [*opening, {"role": "assistant", "content": "ok"}]
        first = trajectory.plan([*stored, {"role": "user", "content": "y"}], None, "b", False)
        second = trajectory.plan([*stored, {"role": "user", "content": "z"}], None, "c", False)
        elsewhere = trajectory.plan([{"role": "user", "content": "a title"}], None, "d", False)
        assert first.conversation == second.conversation == "c0" and elsewhere.conversation is None
        assert await registry.commit(session, first, turn(session.session_id, 0, 0, 2, "y"))
        with pytest.raises(SessionMovedOnError):
            await registry.commit(session, second, turn(session.session_id, 0, 0, 2, "z"))
        opened = await registry.commit(session, elsewhere, turn(session.session_id, 0, None, 0, "a title"))
        assert opened is not None and opened.conversation_id == "c1" and opened.node_id == 2

    asyncio.run(scenario())


def test_deleted_ids_are_gone_and_unknown_ids_not_found() -> None:
    async def scenario() -> None:
        registry = SessionRegistry()
        session = await registry.create(SessionConfig())
        await registry.delete(session.session_id)
        with pytest.raises(SessionGoneError):
            registry.get(session.session_id)
        with pytest.raises(SessionNotFoundError):
            registry.get("0" * 32)
        plan = session.trajectory.plan([], None, "", False)
        assert not await registry.commit(session, plan, turn("x", 0, None, 0, ""))

    asyncio.run(scenario())


def test_expiry_is_an_event_the_sink_records_and_the_id_then_answers_gone() -> None:
    async def scenario() -> None:
        sink = ListSink()
        registry = SessionRegistry(sink=sink)
        session = await registry.create(SessionConfig(ttl_seconds=0.01))
        await asyncio.sleep(0.03)
        with pytest.raises(SessionGoneError, match="expired"):
            registry.get(session.session_id)  # a lookup answers 410 but does not change the registry
        assert len(registry) == 1
        assert await registry.evict_expired() == [session.session_id]
        deleted = sink.events[-1]
        assert isinstance(deleted, SessionDeleted) and deleted.reason == "expired" and len(registry) == 0

    asyncio.run(scenario())


class SlowSink(ListSink):
    """Awaits like a journal's fsync: other coroutines run while a record is being written."""

    async def record(self, event: SessionEvent) -> None:
        await asyncio.sleep(0.01)
        await super().record(event)


class FailingSink(ListSink):
    """A journal whose writes fail (a full disk)."""

    fail = False

    async def record(self, event: SessionEvent) -> None:
        if self.fail:
            raise OSError("disk full")
        await super().record(event)


def test_concurrent_siblings_get_distinct_node_ids_assigned_under_the_lock() -> None:
    async def scenario() -> None:
        registry = SessionRegistry(sink=SlowSink())
        session = await registry.create(SessionConfig(trajectory=TrajectoryKind.TREE))
        trajectory = session.trajectory
        plans = [trajectory.plan([{"role": "user", "content": t}], None, t, False) for t in "abc"]
        tentative = trajectory.store.next_node_id  # what each turn saw when it was built, before any commit
        events = [turn(session.session_id, tentative, None, 0, t) for t in "abc"]
        committed = await asyncio.gather(*(registry.commit(session, p, e) for p, e in zip(plans, events, strict=True)))
        assert sorted(event.node_id for event in committed if event is not None) == [0, 1, 2]
        assert len(trajectory.store) == 3

    asyncio.run(scenario())


def test_a_failed_journal_write_leaves_the_session_and_the_registry_as_they_were() -> None:
    async def scenario() -> None:
        sink = FailingSink()
        registry = SessionRegistry(sink=sink)
        session = await registry.create(SessionConfig())
        trajectory = session.trajectory
        sink.fail = True
        plan = trajectory.plan([{"role": "user", "content": "x"}], None, "x", False)
        with pytest.raises(OSError):
            await registry.commit(session, plan, turn(session.session_id, 0, None, 0, "x"))
        assert len(trajectory.store) == 0 and trajectory.describe() == {
            **LinearTrajectory(SessionConfig()).describe(),
            "conversations": [],
        }
        with pytest.raises(OSError):
            await registry.create(SessionConfig())
        assert len(registry) == 1
        with pytest.raises(OSError):
            await registry.delete(session.session_id)
        assert registry.get(session.session_id) is session

    asyncio.run(scenario())


def test_of_two_concurrent_deletes_the_second_finds_the_session_gone() -> None:
    async def scenario() -> None:
        sink = SlowSink()
        registry = SessionRegistry(sink=sink)
        session = await registry.create(SessionConfig())
        outcomes = await asyncio.gather(
            registry.delete(session.session_id), registry.delete(session.session_id), return_exceptions=True
        )
        assert outcomes[0] is None and isinstance(outcomes[1], SessionGoneError)
        assert [type(event).__name__ for event in sink.events] == ["SessionCreated", "SessionDeleted"]

    asyncio.run(scenario())
