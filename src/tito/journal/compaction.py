"""Drop deleted and expired sessions from closed segments, so the journal stays proportional to live data.

A session is dead once the journal holds its `SessionDeleted` (the server journals TTL evictions as
`reason="expired"`), wherever that record sits. Each closed segment holding a dead session's records is rewritten
with the other records copied byte for byte (live sessions' events stay bit-identical): write `N.seg.tmp`, fsync,
rename over `N.seg`; a segment left empty is removed; then the directory is fsynced. Killed at any point, the
journal reads as either the old or the new segment, and a leftover `.tmp` is removed by recovery.
Only segments below the writer's active one are touched, so compaction runs beside a live writer.

Imports from tito: journal.codec, journal.framing, journal.segments, journal.writer.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from tito.journal.codec import EventType, session_id_of
from tito.journal.framing import RECORD_HEADER, SegmentReader, segment_header
from tito.journal.segments import fsync_directory, list_segments, segment_number, temp_path, write_all
from tito.journal.writer import JournalWriter

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CompactionResult:
    segments_rewritten: int
    segments_removed: int
    records_dropped: int
    bytes_before: int
    """Total size of the segments compaction looked at."""
    bytes_after: int


def dead_sessions(directory: Path) -> set[str]:
    """Sessions with a deletion record anywhere in the journal (a damaged tail only hides deletions: safe)."""
    dead: set[str] = set()
    for segment in list_segments(directory):
        for record in SegmentReader(segment.read_bytes()):
            if record.event_type == EventType.SESSION_DELETED:
                dead.add(session_id_of(record.payload))
    return dead


def compact(directory: Path, below_segment: int, dead: set[str] | None = None) -> CompactionResult:
    """Rewrite every segment numbered below `below_segment` without the records of `dead` sessions
    (default: `dead_sessions(directory)`)."""
    dead = dead_sessions(directory) if dead is None else dead
    rewritten = removed = dropped = before = after = 0
    for segment in list_segments(directory):
        if segment_number(segment) >= below_segment:
            break
        data = segment.read_bytes()
        before += len(data)
        reader = SegmentReader(data)
        records = list(reader)
        if reader.damage is not None or reader.format_version is None:
            logger.warning("journal compaction: skipping damaged %s (%s)", segment, reader.damage)
            after += len(data)
            continue
        kept = [r for r in records if session_id_of(r.payload) not in dead]
        if len(kept) == len(records):
            after += len(data)
            continue
        dropped += len(records) - len(kept)
        if not kept:
            segment.unlink()
            removed += 1
            continue
        chunks = [segment_header(reader.format_version)]
        chunks += [data[r.offset : r.offset + RECORD_HEADER.size + len(r.payload)] for r in kept]
        new_bytes = b"".join(chunks)
        _write_durably(temp_path(segment), new_bytes)
        os.replace(temp_path(segment), segment)
        rewritten += 1
        after += len(new_bytes)
    if rewritten or removed:
        fsync_directory(directory)
    return CompactionResult(rewritten, removed, dropped, before, after)


class BackgroundCompactor:
    """Compacts a live writer's closed segments every `every_s` seconds on its own thread until `stop`."""

    def __init__(self, writer: JournalWriter, every_s: float = 60.0) -> None:
        self._writer = writer
        self._every_s = every_s
        self._stop = threading.Event()
        self.last_result: CompactionResult | None = None
        self._thread = threading.Thread(target=self._run, name="tito-journal-compaction", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop after the current pass (a pass is safe to interrupt, but ending it cleanly is tidier)."""
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._every_s):
            try:
                self.last_result = compact(self._writer.directory, self._writer.active_segment)
            except Exception:  # an odd record or a disk error must not end compaction for the process's life
                logger.exception("journal compaction failed; it will retry in %.0f s", self._every_s)


def _write_durably(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
