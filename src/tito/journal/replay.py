"""Read a journal directory back into events, per session, with a report of what was dropped and why.

Segments are read in order. The first torn or corrupt record ends the replay: what came before is kept; the rest
of that segment and every later segment are dropped (their events may depend on the lost one) and named in the
`ReplayReport`, with a warning. Reading never changes the directory (`tito.journal.recovery` repairs it).

Imports from tito: errors, trajectory.events, journal.codec, journal.framing, journal.segments.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tito.errors import JournalError
from tito.journal.codec import FORMAT_VERSION, decode_event
from tito.journal.framing import SegmentReader
from tito.journal.segments import list_segments
from tito.trajectory.events import SamplesTaken, SessionCreated, SessionDeleted, SessionEvent, TurnCommitted

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Damage:
    """The first torn or corrupt record: where it starts and what is lost from there on."""

    segment: Path
    offset: int
    reason: str
    dropped_bytes: int
    """Bytes of `segment` from `offset` to its end."""

    def __str__(self) -> str:
        return f"{self.segment} at byte {self.offset}: {self.reason} ({self.dropped_bytes} bytes dropped)"


@dataclass(frozen=True)
class ReplayReport:
    segments_read: int
    records_read: int
    damage: Damage | None = None
    dropped_segments: tuple[Path, ...] = ()
    """Whole segments after the damaged one, not replayed."""
    orphaned_sessions: tuple[str, ...] = ()
    """Sessions with events but no `SessionCreated` and no deletion (their start was lost); not rebuilt."""


@dataclass
class SessionLog:
    """One session's events as replayed: enough to rebuild its trajectory and its TTL clock."""

    created: SessionCreated
    turns: list[TurnCommitted] = field(default_factory=list)
    samples_taken: int = 0
    samples_request: Mapping[str, Any] = field(default_factory=dict)
    """The last `/samples` body's given fields (`SamplesTaken.request`): what an export replays."""
    deleted: SessionDeleted | None = None
    last_activity: float = 0.0
    """Time of the session's latest event: its TTL clock restarts from here."""

    @property
    def session_id(self) -> str:
        return self.created.session_id

    def status(self, now: float) -> str:
        """`deleted`, `expired` (by the TTL: deleted or idle past it at `now`) or `live`."""
        if self.deleted is not None:
            return "expired" if self.deleted.reason == "expired" else "deleted"
        ttl = self.created.config.ttl_seconds
        if ttl is not None and now - self.last_activity > ttl:
            return "expired"
        return "live"


@dataclass
class Replay:
    events: list[SessionEvent]
    """Every intact event, in journal order."""
    sessions: dict[str, SessionLog]
    """Sessions whose creation was replayed, in creation order."""
    report: ReplayReport

    def live_sessions(self, now: float) -> list[SessionLog]:
        """The sessions a restarted server serves again (not deleted, TTL not elapsed at `now`)."""
        return [log for log in self.sessions.values() if log.status(now) == "live"]


def replay(directory: Path) -> Replay:
    """Every intact event of the journal in `directory`; raises JournalError for a segment of another format."""
    events: list[SessionEvent] = []
    segments = list_segments(directory)
    damage: Damage | None = None
    dropped: tuple[Path, ...] = ()
    read = 0
    for index, segment in enumerate(segments):
        reader = SegmentReader(segment.read_bytes())
        read += 1
        for record in reader:
            if reader.format_version != FORMAT_VERSION:
                raise JournalError(
                    f"{segment}: journal format version {reader.format_version}; this tito reads {FORMAT_VERSION}"
                )
            try:
                events.append(decode_event(record.event_type, record.payload))
            except JournalError as exc:
                exc.add_note(f"in {segment} at byte {record.offset}")
                raise
        if reader.damage is not None:
            damage = Damage(
                segment, reader.damage.offset, reader.damage.reason, len(reader.data) - reader.damage.offset
            )
            dropped = tuple(segments[index + 1 :])
            break
    sessions, orphans = _group(events)
    report = ReplayReport(read, len(events), damage, dropped, orphans)
    if damage is not None:
        later = f"; {len(dropped)} later segment(s) not replayed" if dropped else ""
        logger.warning("journal damaged: %s; kept the %d records before it%s", damage, len(events), later)
    if orphans:
        logger.warning("journal: %d session(s) have events but no creation record: %s", len(orphans), orphans[:5])
    return Replay(events, sessions, report)


def _group(events: list[SessionEvent]) -> tuple[dict[str, SessionLog], tuple[str, ...]]:
    sessions: dict[str, SessionLog] = {}
    # Sessions seen without their creation -> whether their deletion was seen: compaction drops a deleted session's
    # start from a closed segment while its deletion may still sit in the active one.
    unknown: dict[str, bool] = {}
    for event in events:
        if isinstance(event, SessionCreated):
            sessions[event.session_id] = SessionLog(created=event, last_activity=event.at)
            continue
        log = sessions.get(event.session_id)
        if log is None:
            unknown[event.session_id] = unknown.get(event.session_id, False) or isinstance(event, SessionDeleted)
            continue
        log.last_activity = max(log.last_activity, event.at)
        if isinstance(event, TurnCommitted):
            log.turns.append(event)
        elif isinstance(event, SamplesTaken):
            log.samples_taken += 1
            log.samples_request = event.request
        else:
            log.deleted = event
    return sessions, tuple(session for session, was_deleted in unknown.items() if not was_deleted)
