"""Live sessions: each holds its config, trajectory, lock and idle clock; every change goes through an event.

`SessionRegistry.apply(event)` is the one mutator, used live and by the journal's restore on restart
(server/sessions/journaling.py), so a replayed registry cannot differ from the live one. A live change is handed to the
`EventSink` (the journal, when enabled) first and applied once it is recorded, so a failed write changes nothing;
both happen before the reply leaves. The session lock covers check + record + apply only, never an engine call.

Imports nothing from tito but errors, journal.shared, trajectory, server.errors, server.sessions.resends and
server.sessions.resent_prefix.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from tito.journal.shared import SESSION_ID_PATTERN
from tito.server.errors import (
    AtCapacityError,
    BadRequestError,
    SessionGoneError,
    SessionIdTakenError,
    SessionNotFoundError,
)
from tito.server.sessions.resends import ResendCounts
from tito.server.sessions.resent_prefix import ResentPrefix
from tito.trajectory import create_episode
from tito.trajectory.base import TurnPlan
from tito.trajectory.episode import Episode
from tito.trajectory.events import (
    SamplesTaken,
    SessionConfig,
    SessionCreated,
    SessionDeleted,
    SessionEvent,
    TurnCommitted,
)

_TOMBSTONES = 100_000
"""How many deleted ids are remembered to answer 410 rather than 404."""


class EventSink(Protocol):
    """Where applied events go before the reply leaves (the journal); awaited under the session's lock."""

    async def record(self, event: SessionEvent) -> None: ...


class NullSink:
    """The default sink: sessions live in memory only."""

    async def record(self, event: SessionEvent) -> None:
        return None


@dataclass
class Session:
    session_id: str
    config: SessionConfig
    trajectory: Episode
    """The episode: its conversations, each a linear or tree trajectory (`tito.trajectory.episode`)."""
    created_at: float
    """Wall-clock time of creation."""
    last_used: float = field(default_factory=time.monotonic)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    deleted: bool = False
    """True once the session is deleted or expired."""
    samples_taken: int = 0
    """How many times its samples were taken (`SamplesTaken` events)."""
    reward: float | None = None
    """The reward the trainer posted with its latest samples request; memory only (the journal records no reward)."""
    resends: ResendCounts = field(default_factory=ResendCounts)
    """How this session's resent conversations matched (since this server started)."""
    resent_bodies: dict[str, ResentPrefix[Any]] = field(default_factory=dict)
    """Per turn route, the previous body, from whose prefix the next is read (memory only, rebuilt on the next
    turn after a restart)."""
    translations: dict[str, list[Any]] = field(default_factory=dict)
    """Per dialect, the last requests' translations to chat requests (server.dialects.edge.remember), reused for
    the messages a resend keeps."""
    deletion_callbacks: set[Callable[[], None]] = field(default_factory=set)
    """Called once when the session is deleted or expires: a turn in flight aborts its engine request. Plain
    callbacks rather than an `asyncio.Event`, whose waiting takes a task per turn."""

    def mark_deleted(self) -> None:
        self.deleted = True
        for callback in list(self.deletion_callbacks):
            callback()
        self.deletion_callbacks.clear()


def _nothing(session_id: str) -> None:
    return None


class SessionRegistry:
    """Live sessions by id, capacity and idle-TTL limits, and the event apply path."""

    def __init__(
        self,
        *,
        max_sessions: int | None = None,
        sink: EventSink | None = None,
        trajectory_factory: Callable[[SessionConfig], Episode] = create_episode,
    ) -> None:
        self.max_sessions = max_sessions
        self.sink: EventSink = sink or NullSink()
        self._trajectory_factory = trajectory_factory
        self.on_session_end: Callable[[str], None] = _nothing
        """Called with a session's id when it ends live (deleted, expired; server.scaleout.router_release), never on
        replay."""
        self._sessions: dict[str, Session] = {}
        self._gone: OrderedDict[str, str] = OrderedDict()
        """Deleted or expired ids and why, oldest first."""

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self) -> Iterator[Session]:
        return iter(list(self._sessions.values()))

    def get(self, session_id: str, touch: bool = True) -> Session:
        """The live session; 410 if it was deleted or expired, 404 if it never existed. Touches its idle clock
        (unless `touch` is False: a reader such as the inspector does not keep a session alive).

        An expired session not yet swept answers 410 here; the sweeper records its deletion (an event, so the
        journal sees it), never this synchronous lookup."""
        session = self._sessions.get(session_id)
        if session is None or self._expired(session, time.monotonic()):
            reason = "expired" if session is not None else self._gone.get(session_id)
            if reason is not None:
                raise SessionGoneError(f"session {session_id} was {reason}; open a new one with POST /sessions")
            raise SessionNotFoundError(f"no session {session_id!r}; open one with POST /sessions")
        if touch:
            session.last_used = time.monotonic()
        return session

    def is_live(self, session: Session) -> bool:
        return self._sessions.get(session.session_id) is session

    def knows(self, session_id: str) -> bool:
        """Held here, or deleted/expired here (a 410): either way this process answers for it."""
        return session_id in self._sessions or session_id in self._gone

    async def create(self, config: SessionConfig, session_id: str | None = None) -> Session:
        """A new session; `session_id`: the id the router minted (and hashed this request by), else a random one."""
        if session_id is not None:
            if SESSION_ID_PATTERN.fullmatch(session_id) is None:
                raise BadRequestError(
                    f"X-Tito-Session-Id {session_id[:200]!r} is not a session id: 8-128 of A-Z a-z 0-9 _ -"
                )
            if self.knows(session_id):
                raise SessionIdTakenError(f"session id {session_id} is or was in use; mint another one")
        if self.max_sessions is not None and len(self._sessions) >= self.max_sessions:
            await self.evict_expired()
            if len(self._sessions) >= self.max_sessions:
                raise AtCapacityError(
                    f"the server holds its maximum of {self.max_sessions} live sessions; delete finished sessions "
                    "(DELETE /sessions/{id}) or start tito serve with a larger --max-sessions"
                )
        event = SessionCreated(session_id or secrets.token_hex(16), config, time.time())
        await self.sink.record(event)
        self.apply(event)
        return self._sessions[event.session_id]

    async def commit(self, session: Session, plan: TurnPlan, event: TurnCommitted) -> TurnCommitted | None:
        """Record a generated turn; None when the session was deleted meanwhile (the reply still goes out).

        Under the session lock: the plan is checked (within its conversation only), the node id and conversation
        assigned (concurrent siblings and conversations get distinct ids whatever order they finish in), the event
        recorded by the sink (the journal), and only then applied, so a failed journal write leaves the session as
        it was. Returns the event as committed."""
        async with session.lock:
            if not self.is_live(session):
                return None
            session.trajectory.check(plan)
            event = session.trajectory.stamp(plan, event)
            await self.sink.record(event)
            self.apply(event)
            session.last_used = time.monotonic()
        return event

    async def delete(self, session_id: str, reason: str = "deleted") -> None:
        session = self.get(session_id)
        async with session.lock:
            self._check_live(session)
            event = SessionDeleted(session_id, time.time(), reason)
            await self.sink.record(event)
            self.apply(event)
        self.on_session_end(session_id)

    async def samples_taken(
        self, session: Session, reward: float | None = None, request: Mapping[str, Any] | None = None
    ) -> None:
        """Record that the samples were taken, with the body that asked (`SamplesTaken.request`)."""
        async with session.lock:
            self._check_live(session)
            event = SamplesTaken(session.session_id, time.time(), dict(request or {}))
            await self.sink.record(event)
            self.apply(event)
            if reward is not None:
                session.reward = reward

    async def evict_expired(self) -> list[str]:
        """Delete every session idle past its TTL (never one with a turn in flight); returns their ids."""
        expired: list[str] = []
        for session in list(self._sessions.values()):
            if not self._expired(session, time.monotonic()):
                continue
            async with session.lock:
                if not self.is_live(session) or not self._expired(session, time.monotonic()):
                    continue
                event = SessionDeleted(session.session_id, time.time(), "expired")
                await self.sink.record(event)
                self.apply(event)
                expired.append(session.session_id)
            self.on_session_end(session.session_id)
        return expired

    def _check_live(self, session: Session) -> None:
        """Under the session's lock: a session deleted or expired while this request waited is gone (410)."""
        if not self.is_live(session):
            reason = self._gone.get(session.session_id, "deleted")
            raise SessionGoneError(f"session {session.session_id} was {reason}; open a new one with POST /sessions")

    def apply(self, event: SessionEvent) -> None:
        """The one way the registry changes, live and on replay."""
        if isinstance(event, SessionCreated):
            self._sessions[event.session_id] = Session(
                event.session_id, event.config, self._trajectory_factory(event.config), event.at
            )
        elif isinstance(event, TurnCommitted):
            self._sessions[event.session_id].trajectory.apply(event)
        elif isinstance(event, SamplesTaken):
            self._sessions[event.session_id].samples_taken += 1
        elif isinstance(event, SessionDeleted):
            deleted = self._sessions.pop(event.session_id, None)
            if deleted is not None:
                deleted.mark_deleted()
            self._gone[event.session_id] = event.reason
            while len(self._gone) > _TOMBSTONES:
                self._gone.popitem(last=False)

    @staticmethod
    def _expired(session: Session, now: float) -> bool:
        """Idle past its TTL; a session with a turn in flight (its abort watch registered) is not idle."""
        ttl = session.config.ttl_seconds
        return ttl is not None and not session.deletion_callbacks and now - session.last_used > ttl
