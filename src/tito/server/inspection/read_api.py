"""The read API: `GET /sessions`, `GET /sessions/{id}`, `GET /sessions/{id}/turns/{node}`, over a `SessionSource`.

`tito serve` reads its live sessions (`LiveSessions`: the list, the turns and `?touch=false` leave a session's idle
clock alone, so a page polling it does not keep it alive); `tito inspect` reads a journal (`JournalSessions`,
replayed again when its files change, so a journal a server is still writing updates too). Both answer through
`tito.server.inspection.views`, so a program and the page see the same JSON. The routes sit behind the app's API-key
rule like every other data route.

Imports from tito: errors, journal, server.errors, server.inspection.views, server.replies,
server.sessions.registry, server.state, tokenizer, trajectory.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Protocol

from fastapi import APIRouter
from fastapi.responses import Response

from tito.errors import ConfigurationError, JournalError
from tito.journal.replay import SessionLog, replay
from tito.journal.segments import list_segments
from tito.server.errors import BadRequestError, SessionNotFoundError
from tito.server.inspection.views import InspectedSession, session_detail, session_row, turn_detail
from tito.server.replies import json_response
from tito.server.sessions.registry import Session
from tito.server.state import ServerState
from tito.tokenizer import TitoTokenizer
from tito.trajectory import create_episode
from tito.trajectory.base import Trajectory
from tito.trajectory.events import SessionConfig


class SessionSource(Protocol):
    """Where the read API finds sessions."""

    def sessions(self) -> list[InspectedSession]:
        """Every session, in creation order."""
        ...

    def session(self, session_id: str, touch: bool = False) -> InspectedSession:
        """One session; SessionNotFoundError (404) or SessionGoneError (410) when it is not there. `touch`: count
        the read as the session's activity (restart its idle clock), where sessions have one."""
        ...


class LiveSessions:
    """A running server's sessions, read in the event loop (no turn is applied halfway through a read)."""

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self._pieces: dict[int, str] = {}

    def sessions(self) -> list[InspectedSession]:
        return [self._inspected(session, with_tokenizer=False) for session in self.state.registry]

    def session(self, session_id: str, touch: bool = False) -> InspectedSession:
        return self._inspected(self.state.registry.get(session_id, touch=touch))

    def _inspected(self, session: Session, with_tokenizer: bool = True) -> InspectedSession:
        """The session as the inspector reads it; the list's rows need no tokenizer (a pool lookup per session)."""
        trajectory = session.trajectory
        idle = time.monotonic() - session.last_used
        config = session.config
        pool = self.state.tokenizers
        return InspectedSession(
            session_id=session.session_id,
            status="generating" if session.deletion_callbacks else "live",
            config=config,
            trajectory=trajectory,
            turns=[node.turn for node in trajectory.store],
            created_at=session.created_at,
            last_activity=time.time() - idle,
            samples_taken=session.samples_taken,
            reward=session.reward,
            resends=session.resends.as_json(),
            tito_tokenizer=(
                pool.get(config.chat_template_kwargs, None, config.allowed_append_roles) if with_tokenizer else None
            ),
            pieces=self._pieces,
        )


class JournalSessions:
    """The sessions of a journal directory, read-only (no lock, no repair), replayed again when its files change."""

    def __init__(self, directory: Path, tito_tokenizer: TitoTokenizer | None = None) -> None:
        if not directory.is_dir():
            raise JournalError(f"no journal directory at {directory}")
        self.directory = directory
        self.tito_tokenizer = tito_tokenizer
        self.damage: str | None = None
        self._pieces: dict[int, str] = {}
        self._signature: list[tuple[str, int, int]] | None = None
        self._sessions: dict[str, InspectedSession] = {}

    def sessions(self) -> list[InspectedSession]:
        self._refresh()
        return list(self._sessions.values())

    def session(self, session_id: str, touch: bool = False) -> InspectedSession:
        self._refresh()
        found = self._sessions.get(session_id)
        if found is None:
            raise SessionNotFoundError(f"the journal at {self.directory} holds no session {session_id!r}")
        return found

    def _refresh(self) -> None:
        signature = [(path.name, *_size_and_mtime(path)) for path in list_segments(self.directory)]
        if signature == self._signature:
            return
        replayed = replay(self.directory)
        now = time.time()
        self._sessions = {log.session_id: self._inspected(log, now) for log in replayed.sessions.values()}
        self.damage = None if replayed.report.damage is None else str(replayed.report.damage)
        self._signature = signature

    def _inspected(self, log: SessionLog, now: float) -> InspectedSession:
        trajectory = _offline_trajectory(log.created.config)
        for turn in log.turns:
            trajectory.apply(turn)
        return InspectedSession(
            session_id=log.session_id,
            status=log.status(now),
            config=log.created.config,
            trajectory=trajectory,
            turns=list(log.turns),
            created_at=log.created.at,
            last_activity=log.last_activity,
            samples_taken=log.samples_taken,
            tito_tokenizer=self.tito_tokenizer,
            pieces=self._pieces,
        )


def _size_and_mtime(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_size, stat.st_mtime_ns


def _offline_trajectory(config: SessionConfig) -> Trajectory:
    """The session's trajectory; when its picker hook cannot be imported here (another machine's code), the default
    picker stands in, so the tree still shows (which leaves the server's picker keeps is then unknown)."""
    try:
        return create_episode(config)
    except ConfigurationError:
        return create_episode(dataclasses.replace(config, sample_picker=None, sample_postprocessor=None))


def read_routes(source: SessionSource) -> APIRouter:
    """The three read routes over `source`."""
    router = APIRouter()

    @router.get("/sessions")
    async def list_sessions() -> Response:
        """Every session (live ones on a server; every journaled one offline), most recently active first."""
        rows = [session_row(session) for session in source.sessions()]
        rows.sort(key=lambda row: row["last_activity"], reverse=True)
        return json_response({"sessions": rows})

    @router.get("/sessions/{session_id}")
    async def describe_session(session_id: str, touch: bool = True) -> Response:
        """As before the inspector, a describe restarts the session's idle clock; `?touch=false` (the page's
        polling) reads without keeping the session alive."""
        return json_response(session_detail(source.session(session_id, touch)))

    @router.get("/sessions/{session_id}/turns/{node}")
    async def describe_turn(session_id: str, node: str) -> Response:
        if not (node.isascii() and node.isdigit()):
            raise BadRequestError(f"turn {node!r}: a node id is a non-negative integer, e.g. /sessions/{{id}}/turns/0")
        return json_response(turn_detail(source.session(session_id), int(node)))

    return router
