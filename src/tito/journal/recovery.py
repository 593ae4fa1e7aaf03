"""Open a journal for a (re)starting server: replay it, repair what a crash left, then start appending.

Repair keeps the journal readable end to end: a damaged segment is cut at its first bad record and the bytes from
there (and any later segments, which replay could not use) move to `*.seg.damaged` files for a person to look
at; an unfinished compaction's temp file is deleted (the segment it was rewriting is still whole).

Imports from tito: journal.framing, journal.replay, journal.segments, journal.writer.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from tito.journal.framing import SEGMENT_HEADER_SIZE
from tito.journal.replay import Damage, Replay, replay
from tito.journal.segments import damaged_path, fsync_directory, list_temp_files
from tito.journal.writer import DirectoryLock, FsyncPolicy, JournalWriter

logger = logging.getLogger(__name__)


def open_journal(
    directory: Path,
    fsync: FsyncPolicy | str = FsyncPolicy.ALWAYS,
    *,
    segment_bytes: int = 64 << 20,
    interval_s: float = 0.05,
) -> tuple[Replay, JournalWriter]:
    """The journal's intact events (rebuild sessions from `replay.live_sessions(now)`) and a writer after them."""
    lock = DirectoryLock(directory)  # before reading: a running writer's half-written tail is not damage to repair
    try:
        for temp in list_temp_files(directory):
            logger.warning("journal: removing %s left by an interrupted compaction", temp)
            temp.unlink()
        replayed = replay(directory)
        if replayed.report.damage is not None:
            quarantine(replayed.report.damage, replayed.report.dropped_segments)
        fsync_directory(directory)
        writer = JournalWriter(directory, fsync, segment_bytes=segment_bytes, interval_s=interval_s, lock=lock)
    except BaseException:
        lock.release()
        raise
    return replayed, writer


def quarantine(damage: Damage, later_segments: tuple[Path, ...]) -> None:
    """Move the damaged bytes and the later segments aside, leaving a journal that reads without damage."""
    segment = damage.segment
    with segment.open("rb") as source:
        source.seek(damage.offset)
        lost = source.read()
    keep_segment = damage.offset >= SEGMENT_HEADER_SIZE
    target = damaged_path(segment)
    target.write_bytes(lost)
    if keep_segment:
        with segment.open("r+b") as handle:
            handle.truncate(damage.offset)
            handle.flush()
            os.fsync(handle.fileno())
    else:
        segment.unlink()
    for later in later_segments:
        later.rename(damaged_path(later))
    logger.warning("journal: moved damaged bytes to %s and %d later segment(s) aside", target, len(later_segments))
