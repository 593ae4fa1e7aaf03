"""Every event type survives encode -> decode exactly: ids and logprobs bit for bit, unicode, None and NaN."""

from __future__ import annotations

import enum
import json
import math
import struct
from array import array
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.journal.events import created, same_event, turn
from tito.errors import JournalError
from tito.journal.codec import EventType, decode_event, encode_event, session_id_of
from tito.trajectory.events import (
    SamplesTaken,
    SessionConfig,
    SessionCreated,
    SessionDeleted,
    SessionEvent,
    TurnCommitted,
)

EVENTS: list[SessionEvent] = [
    created("s-ünïcode-🚀", ttl_seconds=30.5),
    SessionCreated(session_id="defaults", config=SessionConfig(), at=0.0),
    SessionCreated(session_id="grouped", config=SessionConfig(group_id="prompt-3/ü"), at=1.0),
    turn("s1", 0),
    turn("s1", 5, prompt_len=0, output_len=0),
    SamplesTaken(session_id="s1", at=1234.5678),
    SessionDeleted(session_id="s1", at=1e9 + 0.123456789, reason="expired"),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_every_event_type_round_trips_exactly(event: SessionEvent) -> None:
    event_type, payload = encode_event(event)
    decoded = decode_event(event_type, payload)
    assert type(decoded) is type(event)
    assert same_event(decoded, event)
    assert session_id_of(payload) == event.session_id


def test_a_session_config_written_before_sessions_had_groups_decodes_without_one() -> None:
    event_type, payload = encode_event(SessionCreated(session_id="old", config=SessionConfig(group_id="g"), at=2.0))
    older = bytes(payload).replace(b',"group_id":"g"', b"")
    assert b"group_id" not in older
    decoded = decode_event(event_type, older)
    assert isinstance(decoded, SessionCreated) and decoded.config == SessionConfig()


def test_logprobs_keep_every_float32_bit_pattern_including_inf_nan_and_negative_zero() -> None:
    specials = array("f", [-math.inf, math.inf, math.nan, -0.0, 0.0, -1e-45, 3.4028234663852886e38])
    specials.append(struct.unpack("<f", b"\x01\x00\xc0\x7f")[0])  # a NaN with a payload
    event = replace(turn("s", 1, output_len=len(specials)), output_logprobs=specials)
    decoded = decode_event(*encode_event(event))
    assert isinstance(decoded, type(event))
    assert decoded.output_logprobs.tobytes() == specials.tobytes()


def test_ids_keep_the_full_int32_range() -> None:
    ids = array("i", [0, 1, 2**31 - 1, -(2**31), 151_643])
    event = replace(turn("s", 1), prompt_ids=ids)
    decoded = decode_event(*encode_event(event))
    assert isinstance(decoded, type(event)) and decoded.prompt_ids == ids and decoded.prompt_ids.typecode == "i"


def test_a_list_of_ids_is_stored_as_the_compact_array_type() -> None:
    event = replace(turn("s", 1), output_ids=array("l", [5, 6, 7]))
    decoded = decode_event(*encode_event(event))
    assert isinstance(decoded, type(event)) and decoded.output_ids == array("i", [5, 6, 7])


def test_turn_ids_are_raw_arrays_not_json() -> None:
    event = turn("s", 0, prompt_len=2000, output_len=300)
    _, payload = encode_event(event)
    assert len(payload) < 2000 * 4 + 300 * 8 + 1000


def test_a_payload_that_does_not_parse_is_a_journal_error_naming_the_type() -> None:
    event_type, payload = encode_event(turn("s", 0))
    with pytest.raises(JournalError, match=f"record of type {int(EventType.TURN_COMMITTED)}"):
        decode_event(event_type, payload[:-7])
    with pytest.raises(JournalError, match="record of type 99"):
        decode_event(99, payload)


def test_what_cannot_be_stored_is_a_journal_error_naming_the_session() -> None:
    with pytest.raises(JournalError, match=r"session 's1': TurnCommitted cannot be journaled: .*not JSON serializable"):
        encode_event(replace(turn("s1", 0), metadata={"engine": object()}))
    with pytest.raises(JournalError, match="exceeds the 65535 the format allows"):
        encode_event(SamplesTaken(session_id="x" * 70_000, at=0.0))


@settings(max_examples=60, deadline=None)
@given(
    content=st.text(),
    ids=st.lists(st.integers(-(2**31), 2**31 - 1), max_size=50),
    logprobs=st.lists(st.floats(width=32, allow_nan=True), max_size=50),
)
def test_any_unicode_content_ids_and_float32_logprobs_round_trip(
    content: str, ids: list[int], logprobs: list[float]
) -> None:
    event = replace(
        turn("s", 2),
        request_messages=({"role": "tool", "content": content},),
        assistant={"role": "assistant", "content": content[::-1]},
        prompt_ids=array("i", ids),
        output_logprobs=array("f", logprobs),
    )
    assert same_event(decode_event(*encode_event(event)), event)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(value=JSON_VALUES)
def test_metadata_and_messages_decode_as_stdlib_json_would_have_stored_them(value: object) -> None:
    """The orjson fast path and the stdlib fallback (NaN, infinity, ints past 64 bits) store the same values."""
    event = replace(
        turn("s", 1),
        request_messages=({"role": "user", "content": "hi", "extra": value},),
        metadata={"value": value, "nested": [value, {"again": value}]},
    )
    decoded = decode_event(*encode_event(event))
    assert isinstance(decoded, TurnCommitted)
    stdlib = json.loads(json.dumps(value))
    assert repr(decoded.request_messages[0]["extra"]) == repr(stdlib)  # repr: NaN equals NaN, -0.0 differs from 0.0
    assert repr(decoded.metadata) == repr({"value": stdlib, "nested": [stdlib, {"again": stdlib}]})


class Level(enum.IntEnum):
    HIGH = 2


class Colour(enum.Enum):
    RED = "red"


def test_values_beyond_plain_json_keep_stdlib_json_results_and_errors() -> None:
    """orjson would write a plain Enum's value and refuse int keys; the journal keeps stdlib json's behaviour."""
    metadata = {"level": Level.HIGH, "by_id": {7: "seven"}, "huge": 2**70, "tuple": (1, 2.5)}
    decoded = decode_event(*encode_event(replace(turn("s", 1), metadata=metadata)))
    assert isinstance(decoded, TurnCommitted)
    assert decoded.metadata == {"level": 2, "by_id": {"7": "seven"}, "huge": 2**70, "tuple": [1, 2.5]}
    with pytest.raises(JournalError, match="not JSON serializable"):
        encode_event(replace(turn("s", 1), metadata={"colour": Colour.RED}))


def test_a_session_journaled_before_matching_policies_existed_replays_as_strict() -> None:
    """Such a journal's sessions were matched strictly (the only matcher then); a restart must not loosen them."""
    kind, payload = encode_event(created("s1"))
    old = payload.replace(b',"matcher":"harness"', b"")
    assert old != payload
    decoded = decode_event(kind, old)
    assert isinstance(decoded, SessionCreated) and decoded.config.matcher == "strict"
    assert decode_event(kind, payload) == created("s1")
