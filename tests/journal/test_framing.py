"""Records framed with length + type + CRC32: intact ones read back, the first torn or corrupt one stops reading."""

from __future__ import annotations

from tito.journal.framing import RECORD_HEADER, SEGMENT_HEADER_SIZE, SegmentReader, frame, segment_header


def _segment(*payloads: bytes) -> bytes:
    return segment_header(1) + b"".join(frame(2, p) for p in payloads)


def test_intact_records_read_back_with_offsets_and_no_damage() -> None:
    data = _segment(b"first", b"", b"third")
    reader = SegmentReader(data)
    records = [(r.offset, r.event_type, bytes(r.payload)) for r in reader]
    first = SEGMENT_HEADER_SIZE
    assert records == [
        (first, 2, b"first"),
        (first + RECORD_HEADER.size + 5, 2, b""),
        (first + 2 * RECORD_HEADER.size + 5, 2, b"third"),
    ]
    assert reader.damage is None and reader.end == len(data) and reader.format_version == 1


def test_the_type_byte_is_covered_by_the_checksum() -> None:
    data = bytearray(_segment(b"payload"))
    data[SEGMENT_HEADER_SIZE + 4] = 3
    reader = SegmentReader(bytes(data))
    assert list(reader) == []
    assert reader.damage is not None and reader.damage.reason == "checksum mismatch"


def test_a_huge_length_field_is_damage_not_an_allocation() -> None:
    data = bytearray(_segment(b"a", b"b"))
    second = SEGMENT_HEADER_SIZE + RECORD_HEADER.size + 1
    data[second + 3] = 0xFF
    reader = SegmentReader(bytes(data))
    assert [bytes(r.payload) for r in reader] == [b"a"]
    assert reader.damage is not None and reader.damage.offset == second
    assert "implausible record length" in reader.damage.reason


def test_a_file_that_is_not_a_segment_is_reported_at_offset_zero() -> None:
    reader = SegmentReader(b"GARBAGE!and more")
    assert list(reader) == [] and reader.damage is not None
    assert (reader.damage.offset, reader.damage.reason) == (0, "not a tito journal segment (bad magic)")
    torn = SegmentReader(segment_header(1)[:5])
    assert list(torn) == [] and torn.damage is not None and torn.damage.reason == "torn segment header"
