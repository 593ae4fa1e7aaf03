"""Replay reads every intact event in order, groups them per session, and stops at the first damage with a report
naming the segment, the offset and the reason; nothing after damage is replayed."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.journal.events import created, same_event, scripted_event, turn
from tito.errors import JournalError
from tito.journal.framing import MAGIC
from tito.journal.replay import replay
from tito.journal.segments import list_segments
from tito.journal.writer import FsyncPolicy, JournalWriter
from tito.trajectory.events import SessionDeleted, SessionEvent


def _write(directory: Path, events: list[SessionEvent], segment_bytes: int = 1 << 20) -> list[int]:
    """Write `events`; return the end offset of each record in its (single) segment."""
    ends = []
    with JournalWriter(directory, FsyncPolicy.NEVER, segment_bytes=segment_bytes) as writer:
        for event in events:
            writer.append_blocking(event)
            ends.append(list_segments(directory)[-1].stat().st_size)
    return ends


def test_events_replay_in_order_and_group_by_session(tmp_path: Path) -> None:
    events = [scripted_event(i) for i in range(18)]
    _write(tmp_path, events)
    replayed = replay(tmp_path)
    assert len(replayed.events) == 18 and all(map(same_event, replayed.events, events))
    assert list(replayed.sessions) == ["s0", "s1", "s2"]
    s2 = replayed.sessions["s2"]
    assert [t.node_id for t in s2.turns] == [0, 1, 2, 3] and s2.deleted is not None
    assert [log.session_id for log in replayed.live_sessions(now=2001.0)] == ["s0", "s1"]
    assert replayed.sessions["s0"].samples_taken == 1 and replayed.sessions["s0"].last_activity == 2000.0
    assert replayed.report.damage is None and replayed.report.records_read == 18


def test_a_session_idle_past_its_ttl_is_expired_counting_from_its_last_event(tmp_path: Path) -> None:
    _write(tmp_path, [created("a", at=100.0, ttl_seconds=10.0), turn("a", 0, at=105.0)])
    log = replay(tmp_path).sessions["a"]
    assert log.last_activity == 105.0
    assert log.status(now=114.0) == "live" and log.status(now=116.0) == "expired"


def test_events_span_segments_in_number_order(tmp_path: Path) -> None:
    events = [scripted_event(i) for i in range(30)]
    _write(tmp_path, events, segment_bytes=1500)
    assert len(list_segments(tmp_path)) > 3
    assert all(map(same_event, replay(tmp_path).events, events))


def test_a_torn_last_record_is_dropped_at_every_byte_offset(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    source = tmp_path / "source"
    events = [created("s"), turn("s", 0), turn("s", 1, prompt_len=20, output_len=8)]
    ends = _write(source, events)
    data = list_segments(source)[0].read_bytes()
    last_start = ends[1]
    for cut in range(last_start + 1, ends[2]):
        directory = tmp_path / f"cut{cut}"
        directory.mkdir()
        (directory / "00000001.seg").write_bytes(data[:cut])
        with caplog.at_level(logging.WARNING, logger="tito.journal.replay"):
            replayed = replay(directory)
        assert len(replayed.events) == 2 and all(map(same_event, replayed.events, events[:2])), cut
        damage = replayed.report.damage
        assert damage is not None and damage.offset == last_start and damage.dropped_bytes == cut - last_start
        assert "torn" in damage.reason
    assert f"at byte {last_start}" in caplog.text


def test_a_flipped_byte_mid_journal_keeps_everything_before_it(tmp_path: Path) -> None:
    events = [scripted_event(i) for i in range(12)]
    ends = _write(tmp_path, events)
    segment = list_segments(tmp_path)[0]
    data = bytearray(segment.read_bytes())
    data[ends[5] + 40] ^= 0x10  # inside record 6's payload
    segment.write_bytes(bytes(data))
    replayed = replay(tmp_path)
    assert len(replayed.events) == 6 and all(map(same_event, replayed.events, events[:6]))
    damage = replayed.report.damage
    assert damage is not None and (damage.segment, damage.offset, damage.reason) == (
        segment,
        ends[5],
        "checksum mismatch",
    )
    assert str(ends[5]) in str(damage)


def test_damage_in_one_segment_drops_the_later_segments_and_names_them(tmp_path: Path) -> None:
    events = [scripted_event(i) for i in range(30)]
    _write(tmp_path, events, segment_bytes=1500)
    segments = list_segments(tmp_path)
    second = segments[1]
    second.write_bytes(second.read_bytes()[:-3])  # truncated segment
    replayed = replay(tmp_path)
    report = replayed.report
    assert report.damage is not None and report.damage.segment == second
    assert report.dropped_segments == tuple(segments[2:])
    kept = len(replayed.events)
    assert 0 < kept < 30 and all(map(same_event, replayed.events, events[:kept]))


def test_a_segment_of_another_format_version_is_refused_not_skipped(tmp_path: Path) -> None:
    _write(tmp_path, [created("s")])
    segment = list_segments(tmp_path)[0]
    data = bytearray(segment.read_bytes())
    data[len(MAGIC)] = 9
    segment.write_bytes(bytes(data))
    with pytest.raises(JournalError, match="format version 9"):
        replay(tmp_path)


def test_events_of_a_session_whose_creation_was_lost_are_reported_unless_it_was_deleted(tmp_path: Path) -> None:
    _write(tmp_path, [turn("lost", 0), turn("gone", 3), SessionDeleted(session_id="gone", at=5.0)])
    replayed = replay(tmp_path)
    assert replayed.sessions == {} and replayed.report.orphaned_sessions == ("lost",)
