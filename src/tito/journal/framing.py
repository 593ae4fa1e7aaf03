"""Segment bytes: an 8-byte header, then records framed as length + type + CRC32 + payload.

A record is `<u32 payload length><u8 type><u32 crc32(type byte + payload)><payload>`, little-endian. A crash
mid-write leaves a torn record (its length runs past the end of the file); a flipped bit fails the checksum.
Reading stops at the first record that is either, and says where and why: nothing after a damaged record can be
trusted to be framed right.

Imports nothing from tito.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

MAGIC = b"TITOJNL"
SEGMENT_HEADER_SIZE = len(MAGIC) + 1
"""The magic then one byte: the codec's format version."""
RECORD_HEADER = struct.Struct("<IBI")
MAX_PAYLOAD_BYTES = 1 << 30
"""A length above this is a damaged length field, not a record (a turn is megabytes at most)."""


def segment_header(format_version: int) -> bytes:
    return MAGIC + bytes([format_version])


def frame(event_type: int, payload: bytes) -> bytes:
    """One record's bytes."""
    crc = zlib.crc32(payload, zlib.crc32(bytes([event_type])))
    return RECORD_HEADER.pack(len(payload), event_type, crc) + payload


@dataclass(frozen=True)
class Record:
    offset: int
    """Where the record starts in its segment."""
    event_type: int
    payload: memoryview


@dataclass(frozen=True)
class FrameDamage:
    """Where reading a segment stopped before its end, and why."""

    offset: int
    reason: str


@dataclass
class SegmentReader:
    """Reads one segment's bytes: iterate for the intact records; then `damage` says whether and where it stopped."""

    data: bytes
    format_version: int | None = None
    damage: FrameDamage | None = None
    end: int = 0
    """Offset just past the last intact record."""

    def __iter__(self) -> Iterator[Record]:
        view = memoryview(self.data)
        if len(view) < SEGMENT_HEADER_SIZE or bytes(view[: len(MAGIC)]) != MAGIC:
            torn = len(view) < SEGMENT_HEADER_SIZE and MAGIC.startswith(bytes(view))
            reason = "torn segment header" if torn else "not a tito journal segment (bad magic)"
            self.damage = FrameDamage(0, reason)
            return
        self.format_version = view[len(MAGIC)]
        offset = self.end = SEGMENT_HEADER_SIZE
        while offset < len(view):
            if len(view) - offset < RECORD_HEADER.size:
                self.damage = FrameDamage(offset, f"torn record header ({len(view) - offset} of 9 bytes)")
                return
            length, event_type, crc = RECORD_HEADER.unpack_from(view, offset)
            start = offset + RECORD_HEADER.size
            if length > MAX_PAYLOAD_BYTES:
                self.damage = FrameDamage(offset, f"implausible record length {length}")
                return
            if start + length > len(view):
                self.damage = FrameDamage(
                    offset, f"torn record: length {length} runs {start + length - len(view)} bytes past the end"
                )
                return
            payload = view[start : start + length]
            if zlib.crc32(payload, zlib.crc32(bytes([event_type]))) != crc:
                self.damage = FrameDamage(offset, "checksum mismatch")
                return
            yield Record(offset, event_type, payload)
            offset = self.end = start + length
