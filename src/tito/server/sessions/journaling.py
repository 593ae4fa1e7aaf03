"""`tito serve --journal DIR`: replay the journal into the session registry on start, then journal every event.

On open: the journal is replayed and repaired (`tito.journal.open_journal`), its events rebuild the sessions through
`SessionRegistry.apply` (the live path), each live session's TTL clock restarts from its last event's wall
time, and sessions whose TTL elapsed while the server was down are journaled as `SessionDeleted(reason="expired")`
so compaction can drop them. Then the registry's sink is the journal: an event's record is written (and fsynced,
by policy) before the reply that caused it leaves. Closed segments are compacted in the background.

Imports from tito: errors, journal, server.sessions.registry, trajectory.events.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

from tito.errors import TitoError
from tito.journal import BackgroundCompactor, FsyncPolicy, JournalWriter, Replay, ReplayReport, open_journal
from tito.server.sessions.registry import SessionRegistry
from tito.trajectory.events import SessionDeleted, SessionEvent

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Restored:
    """What a server start rebuilt from its journal."""

    live_sessions: int
    turns: int
    expired_on_start: int
    """Sessions whose TTL elapsed while the server was down: journaled as expired now."""
    report: ReplayReport
    unrestorable: tuple[str, ...] = ()
    """Sessions whose events this build cannot apply (e.g. a sample hook that no longer imports): they answer 410
    and stay in the journal untouched, so a build that can rebuild them still may."""

    def __str__(self) -> str:
        report = self.report
        text = (
            f"restored {self.live_sessions} live session(s) with {self.turns} turn(s) from {report.records_read} "
            f"record(s) in {report.segments_read} segment(s); {self.expired_on_start} expired while down"
        )
        if report.damage is not None:
            text += f"; DAMAGED: {report.damage}, {len(report.dropped_segments)} later segment(s) set aside"
        if self.unrestorable:
            text += f"; {len(self.unrestorable)} session(s) could not be rebuilt: {', '.join(self.unrestorable[:5])}"
        if report.orphaned_sessions:
            text += f"; {len(report.orphaned_sessions)} session(s) without a creation record not restored"
        return text


class ServerJournal:
    """The registry's event sink once the journal is replayed; `close` flushes it and stops compaction."""

    def __init__(self, writer: JournalWriter, compactor: BackgroundCompactor, restored: Restored) -> None:
        self.writer = writer
        self.compactor = compactor
        self.restored = restored

    async def record(self, event: SessionEvent) -> None:
        await self.writer.append(event)

    def close(self) -> None:
        self.compactor.stop()
        self.writer.close()


def open_server_journal(
    registry: SessionRegistry,
    directory: Path,
    fsync: FsyncPolicy | str = FsyncPolicy.ALWAYS,
    *,
    compact_every_s: float = 60.0,
    segment_bytes: int = 64 << 20,
) -> ServerJournal:
    """Rebuild `registry` (empty) from the journal in `directory`, then make the journal its sink."""
    replayed, writer = open_journal(directory, fsync, segment_bytes=segment_bytes)
    try:
        restored = restore_sessions(registry, replayed, writer)
    except BaseException:
        writer.close()
        raise
    log = logger.warning if restored.report.damage is not None else logger.info
    log("journal %s: %s", directory, restored)
    registry.sink = journal = ServerJournal(writer, BackgroundCompactor(writer, compact_every_s), restored)
    return journal


def restore_sessions(registry: SessionRegistry, replayed: Replay, writer: JournalWriter) -> Restored:
    """Apply the replayed events of every session whose creation survived (and every deletion, so deleted ids
    answer 410) through `SessionRegistry.apply`, the live path; restart live TTL clocks from wall times; journal the
    deletions of sessions expired since. A session whose events fail to apply is set aside, not the whole start."""
    known = replayed.sessions
    wall, monotonic = time.time(), time.monotonic()
    unrestorable: dict[str, str] = {}
    for event in replayed.events:
        if event.session_id in unrestorable or not (isinstance(event, SessionDeleted) or event.session_id in known):
            continue
        try:
            registry.apply(event)
        except TitoError as exc:
            unrestorable[event.session_id] = str(exc)
            logger.error("journal: session %s cannot be rebuilt: %s", event.session_id, exc)
            registry.apply(SessionDeleted(event.session_id, wall, "unrestorable after a restart"))
    expired = 0
    turns = 0
    for log in known.values():
        if log.session_id in unrestorable:
            continue
        status = log.status(wall)
        if status == "live":
            registry.get(log.session_id).last_used = monotonic - max(0.0, wall - log.last_activity)
            turns += len(log.turns)
        elif status == "expired" and log.deleted is None:
            event = SessionDeleted(log.session_id, wall, "expired")
            registry.apply(event)
            writer.append_blocking(event)
            expired += 1
    return Restored(len(registry), turns, expired, replayed.report, tuple(unrestorable))
