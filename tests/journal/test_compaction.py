"""Compaction drops deleted and expired sessions from closed segments, keeps live sessions' records byte for
byte, never touches the active segment, and leaves a readable journal if killed part way."""

from __future__ import annotations

import time
from pathlib import Path

from tests.journal.events import created, same_event, turn
from tito.journal.codec import encode_event
from tito.journal.compaction import BackgroundCompactor, compact, dead_sessions
from tito.journal.framing import frame
from tito.journal.recovery import open_journal
from tito.journal.replay import replay
from tito.journal.segments import list_segments, temp_path
from tito.journal.writer import FsyncPolicy, JournalWriter
from tito.trajectory.events import SessionDeleted, SessionEvent


def _interleaved() -> list[SessionEvent]:
    """Three sessions interleaved over many segments; `dead` deleted, `old` expired, `live` kept."""
    events: list[SessionEvent] = [created("live"), created("dead"), created("old", ttl_seconds=5.0)]
    for node in range(6):
        events += [turn("live", node), turn("dead", node), turn("old", node)]
    events += [SessionDeleted(session_id="dead", at=3000.0), SessionDeleted("old", at=3001.0, reason="expired")]
    return events


def _write(directory: Path, events: list[SessionEvent]) -> JournalWriter:
    writer = JournalWriter(directory, FsyncPolicy.NEVER, segment_bytes=1200)
    for event in events:
        writer.append_blocking(event)
    return writer


def test_compaction_keeps_live_records_byte_identical_and_drops_dead_sessions(tmp_path: Path) -> None:
    events = _interleaved()
    with _write(tmp_path, events) as writer:
        before = sum(p.stat().st_size for p in list_segments(tmp_path))
        assert dead_sessions(tmp_path) == {"dead", "old"}
        result = compact(tmp_path, writer.active_segment)
    after = sum(p.stat().st_size for p in list_segments(tmp_path))
    assert result.records_dropped > 0 and after < before / 2
    replayed = replay(tmp_path)
    live = [e for e in events if e.session_id == "live"]
    kept_live = [e for e in replayed.events if e.session_id == "live"]
    assert len(kept_live) == len(live) and all(map(same_event, kept_live, live))
    live_frames = b"".join(frame(*encode_event(e)) for e in live)
    assert live_frames in b"".join(p.read_bytes()[8:] for p in list_segments(tmp_path))
    assert list(replayed.sessions) == ["live"] and replayed.report.orphaned_sessions == ()


def test_compaction_never_touches_the_active_segment(tmp_path: Path) -> None:
    with _write(tmp_path, [created("dead"), turn("dead", 0)]) as writer:
        writer.append_blocking(SessionDeleted(session_id="dead", at=5.0))
        active = list_segments(tmp_path)[-1]
        before = active.read_bytes()
        result = compact(tmp_path, writer.active_segment)
        assert active.read_bytes() == before and result.records_dropped == 0
        writer.append_blocking(created("next"))
    assert [e.session_id for e in replay(tmp_path).events] == ["dead", "dead", "dead", "next"]


def test_a_segment_left_empty_is_removed(tmp_path: Path) -> None:
    with _write(tmp_path, [created("dead"), turn("dead", 0), turn("dead", 1)]) as writer:
        closed = [p for p in list_segments(tmp_path)][:-1]
        writer.append_blocking(SessionDeleted(session_id="dead", at=5.0))
        result = compact(tmp_path, writer.active_segment)
    assert result.segments_removed == len(closed) > 0 and not any(p.exists() for p in closed)


def test_compaction_killed_before_its_rename_leaves_the_journal_as_it_was(tmp_path: Path) -> None:
    events = _interleaved()
    _write(tmp_path, events).close()
    first = list_segments(tmp_path)[0]
    temp_path(first).write_bytes(first.read_bytes()[:30])  # a rewrite cut short by kill -9
    replayed, writer = open_journal(tmp_path, FsyncPolicy.NEVER)
    with writer:
        assert all(map(same_event, replayed.events, events))
        assert not temp_path(first).exists()
        compact(tmp_path, writer.active_segment)
    assert list(replay(tmp_path).sessions) == ["live"]


def test_the_background_compactor_compacts_a_live_writer_and_stops(tmp_path: Path) -> None:
    with _write(tmp_path, _interleaved()) as writer:
        compactor = BackgroundCompactor(writer, every_s=0.01)
        deadline = time.monotonic() + 10
        while compactor.last_result is None and time.monotonic() < deadline:
            time.sleep(0.01)
        compactor.stop()
        writer.append_blocking(turn("live", 6))
    assert compactor.last_result is not None and compactor.last_result.records_dropped > 0
    replayed = replay(tmp_path)
    assert list(replayed.sessions) == ["live"] and len(replayed.sessions["live"].turns) == 7
