"""Opening a journal after a crash: intact events come back, damage is moved aside (not deleted) so the journal
reads cleanly again, and new appends land after the kept events."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.journal.events import created, same_event, scripted_event
from tito.errors import JournalError
from tito.journal.recovery import open_journal
from tito.journal.replay import replay
from tito.journal.segments import DAMAGED_SUFFIX, list_segments
from tito.journal.writer import FsyncPolicy, JournalWriter


def _write(directory: Path, count: int, segment_bytes: int = 1 << 20) -> None:
    with JournalWriter(directory, FsyncPolicy.NEVER, segment_bytes=segment_bytes) as writer:
        for i in range(count):
            writer.append_blocking(scripted_event(i))


def test_a_torn_tail_is_quarantined_and_appends_continue_after_the_kept_events(tmp_path: Path) -> None:
    _write(tmp_path, 10)
    segment = list_segments(tmp_path)[0]
    data = segment.read_bytes()
    segment.write_bytes(data[:-5])
    replayed, writer = open_journal(tmp_path, FsyncPolicy.NEVER)
    with writer:
        assert len(replayed.events) == 9 and replayed.report.damage is not None
        writer.append_blocking(created("after"))
    quarantined = list(tmp_path.glob(f"*{DAMAGED_SUFFIX}"))
    assert len(quarantined) == 1 and quarantined[0].read_bytes() == data[segment.stat().st_size : -5]
    again = replay(tmp_path)
    assert again.report.damage is None
    assert all(map(same_event, again.events[:9], [scripted_event(i) for i in range(9)]))
    assert again.events[9].session_id == "after"


def test_damage_in_an_early_segment_moves_the_later_segments_aside(tmp_path: Path) -> None:
    _write(tmp_path, 30, segment_bytes=1500)
    segments = list_segments(tmp_path)
    data = bytearray(segments[0].read_bytes())
    data[60] ^= 0xFF
    segments[0].write_bytes(bytes(data))
    replayed, writer = open_journal(tmp_path, FsyncPolicy.NEVER)
    writer.close()
    assert replayed.report.dropped_segments == tuple(segments[1:])
    assert len(list(tmp_path.glob(f"*{DAMAGED_SUFFIX}"))) == len(segments)
    assert replay(tmp_path).report.damage is None


def test_a_segment_with_a_torn_header_is_moved_aside_whole(tmp_path: Path) -> None:
    _write(tmp_path, 3)
    (tmp_path / "00000002.seg").write_bytes(b"TITO")
    replayed, writer = open_journal(tmp_path, FsyncPolicy.NEVER)
    writer.close()
    assert len(replayed.events) == 3
    assert (tmp_path / "00000002.seg.damaged").read_bytes() == b"TITO"
    assert replay(tmp_path).report.damage is None, "the writer's new segment replaced the torn one"


def test_an_interrupted_compaction_temp_file_is_removed_and_its_segment_kept(tmp_path: Path) -> None:
    _write(tmp_path, 6)
    (tmp_path / "00000001.seg.tmp").write_bytes(b"half a rewrite")
    replayed, writer = open_journal(tmp_path, FsyncPolicy.NEVER)
    writer.close()
    assert len(replayed.events) == 6 and not list(tmp_path.glob("*.tmp"))


def test_recovery_refuses_a_directory_another_writer_holds(tmp_path: Path) -> None:
    with JournalWriter(tmp_path, FsyncPolicy.NEVER) as writer:
        writer.append_blocking(created("live"))
        with pytest.raises(JournalError, match="in use"):
            open_journal(tmp_path)
    replayed, writer = open_journal(tmp_path)
    writer.close()
    assert [e.session_id for e in replayed.events] == ["live"]
