"""The journal directory's files: numbered segments, compaction temp files, quarantined damage.

Segments are `00000001.seg`, `00000002.seg`, ...: their numbers give the order of events. A compaction writes
`N.seg.tmp` and renames it over `N.seg`, so a leftover `.tmp` is an unfinished compaction, safe to delete.
Damaged bytes are moved to `N.seg.damaged` (never silently deleted) before the writer appends again.

Imports nothing from tito.
"""

from __future__ import annotations

import os
from pathlib import Path

SEGMENT_SUFFIX = ".seg"
TEMP_SUFFIX = ".seg.tmp"
DAMAGED_SUFFIX = ".seg.damaged"


def segment_path(directory: Path, number: int) -> Path:
    return directory / f"{number:08d}{SEGMENT_SUFFIX}"


def segment_number(path: Path) -> int:
    return int(path.name.removesuffix(SEGMENT_SUFFIX))


def list_segments(directory: Path) -> list[Path]:
    """The segments in event order."""
    found = [p for p in directory.glob(f"*{SEGMENT_SUFFIX}") if p.name.removesuffix(SEGMENT_SUFFIX).isdigit()]
    return sorted(found, key=segment_number)


def list_temp_files(directory: Path) -> list[Path]:
    return sorted(directory.glob(f"*{TEMP_SUFFIX}"))


def temp_path(segment: Path) -> Path:
    return segment.with_name(segment.name.removesuffix(SEGMENT_SUFFIX) + TEMP_SUFFIX)


def damaged_path(segment: Path) -> Path:
    """Where a segment's damaged bytes go; numbered if an earlier repair already used the name."""
    candidate = segment.with_name(segment.name.removesuffix(SEGMENT_SUFFIX) + DAMAGED_SUFFIX)
    n = 1
    while candidate.exists():
        candidate = segment.with_name(f"{segment.name.removesuffix(SEGMENT_SUFFIX)}.{n}{DAMAGED_SUFFIX}")
        n += 1
    return candidate


def fsync_directory(directory: Path) -> None:
    """Make created, renamed and removed names durable (POSIX needs the directory itself fsynced)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """`os.write` until every byte is written (a regular file may take fewer bytes per call)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
