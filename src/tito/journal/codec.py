"""Session events <-> record payloads: a compact, versioned binary encoding.

Every payload starts with the session id (u16 length + UTF-8) and the event time (f64), so compaction and
`tito journal inspect` can read them without decoding the rest. Token ids and logprobs are raw little-endian
int32 / float32 arrays (bit-exact: -inf, NaN payloads and -0.0 survive); messages, tools and metadata are JSON
(`allow_nan`, so a NaN in metadata round-trips too). The format version lives in each segment's header
(`tito.journal.framing`); a change to this layout bumps `FORMAT_VERSION`.

JSON is written by orjson (~20x faster than stdlib `json`, the bulk of a turn's encode cost) when the value is
plain JSON (exact dict/list/tuple/str/int/bool/None and finite floats, checked by `_orjson_safe`); anything else
(NaN or infinity, which orjson would turn into null; subclasses, other types, int keys, huge ints, deep nesting)
goes through stdlib `json`, which keeps its results and errors. `json.loads` reads either's text to the same values
(only float spelling may differ, e.g. `1e16` vs `1e+16`), so the format did not change.

Imports nothing from tito but errors and trajectory.events.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import struct
import sys
from array import array
from collections.abc import Iterable
from typing import Any

import orjson

from tito.errors import JournalError
from tito.trajectory.events import (
    FIRST_CONVERSATION,
    ConversationOpening,
    SamplesTaken,
    SessionConfig,
    SessionCreated,
    SessionDeleted,
    SessionEvent,
    TrajectoryKind,
    TurnCommitted,
)

FORMAT_VERSION = 1

_PREFIX = struct.Struct("<H")
_AT = struct.Struct("<d")
_COUNT = struct.Struct("<I")
_BIG_ENDIAN = sys.byteorder == "big"


class EventType(enum.IntEnum):
    """The record type byte: one per event class; values are part of the on-disk format."""

    SESSION_CREATED = 1
    TURN_COMMITTED = 2
    SAMPLES_TAKEN = 3
    SESSION_DELETED = 4


def encode_event(event: SessionEvent) -> tuple[EventType, bytes]:
    """The record type and payload of `event`; raises JournalError naming the session for what cannot be stored
    (a value JSON cannot hold, a string over 64 KiB where a length prefix is u16)."""
    try:
        return _encode(event)
    except (TypeError, ValueError, struct.error) as exc:
        raise JournalError(
            f"session {event.session_id[:80]!r}: {type(event).__name__} cannot be journaled: {exc}"
        ) from exc


def _encode(event: SessionEvent) -> tuple[EventType, bytes]:
    parts = [_encode_str(event.session_id), _AT.pack(event.at)]
    if isinstance(event, SessionCreated):
        parts.append(_json(_config_to_json(event.config)))
        return EventType.SESSION_CREATED, b"".join(parts)
    if isinstance(event, TurnCommitted):
        header = {
            "node_id": event.node_id,
            "parent_id": event.parent_id,
            "kept_parent_ids": event.kept_parent_ids,
            "request_messages": event.request_messages,
            "tools": event.tools,
            "assistant": event.assistant,
            "finish_reason": event.finish_reason,
            "response_id": event.response_id,
            "request_fingerprint": event.request_fingerprint,
            "metadata": event.metadata,
        }
        if event.conversation_id != FIRST_CONVERSATION or event.opening is not None:
            header["conversation"] = event.conversation_id
        if event.opening is not None:
            header["opening"] = dataclasses.asdict(event.opening)
        parts.append(_encode_blob(_json(header)))
        parts.append(_encode_array(event.prompt_ids, "i"))
        parts.append(_encode_array(event.output_ids, "i"))
        parts.append(_encode_array(event.output_logprobs, "f"))
        return EventType.TURN_COMMITTED, b"".join(parts)
    if isinstance(event, SamplesTaken):
        parts.append(_encode_blob(_json(event.request)))
        return EventType.SAMPLES_TAKEN, b"".join(parts)
    parts.append(_encode_str(event.reason))
    return EventType.SESSION_DELETED, b"".join(parts)


def session_id_of(payload: bytes | memoryview) -> str:
    """The session a payload belongs to, without decoding the rest."""
    session_id, _ = _decode_str(memoryview(payload), 0)
    return session_id


def decode_event(event_type: int, payload: bytes | memoryview) -> SessionEvent:
    """The event a record holds; raises JournalError for an unknown type or a payload that does not parse."""
    view = memoryview(payload)
    try:
        session_id, offset = _decode_str(view, 0)
        (at,) = _AT.unpack_from(view, offset)
        offset += _AT.size
        kind = EventType(event_type)
        if kind is EventType.SESSION_CREATED:
            config = _config_from_json(json.loads(bytes(view[offset:])))
            return SessionCreated(session_id=session_id, config=config, at=at)
        if kind is EventType.TURN_COMMITTED:
            blob, offset = _decode_blob(view, offset)
            header = json.loads(blob)
            prompt_ids, offset = _decode_array(view, offset, "i")
            output_ids, offset = _decode_array(view, offset, "i")
            output_logprobs, offset = _decode_array(view, offset, "f")
            tools = header["tools"]
            opening = header.get("opening")  # both absent in journals written before episodes held conversations
            return TurnCommitted(
                session_id=session_id,
                node_id=header["node_id"],
                parent_id=header["parent_id"],
                kept_parent_ids=header["kept_parent_ids"],
                request_messages=tuple(header["request_messages"]),
                tools=None if tools is None else tuple(tools),
                prompt_ids=prompt_ids,
                output_ids=output_ids,
                output_logprobs=output_logprobs,
                assistant=header["assistant"],
                finish_reason=header["finish_reason"],
                response_id=header["response_id"],
                request_fingerprint=header["request_fingerprint"],
                metadata=header["metadata"],
                at=at,
                conversation_id=header.get("conversation", FIRST_CONVERSATION),
                opening=None if opening is None else ConversationOpening(**opening),
            )
        if kind is EventType.SAMPLES_TAKEN:
            # Records written before the request was kept end at `at`.
            request = json.loads(_decode_blob(view, offset)[0]) if offset < len(view) else {}
            return SamplesTaken(session_id=session_id, at=at, request=request)
        reason, _ = _decode_str(view, offset)
        return SessionDeleted(session_id=session_id, at=at, reason=reason)
    except (ValueError, KeyError, TypeError, struct.error, UnicodeDecodeError) as exc:
        raise JournalError(
            f"record of type {event_type} passed its checksum but cannot be decoded as format version "
            f"{FORMAT_VERSION}: {type(exc).__name__}: {exc}"
        ) from exc


def _config_to_json(config: SessionConfig) -> dict[str, Any]:
    roles = config.allowed_append_roles
    return {
        "trajectory": config.trajectory.value,
        "chat_template_kwargs": config.chat_template_kwargs,
        "allowed_append_roles": None if roles is None else list(roles),
        "max_nodes": config.max_nodes,
        "strict_append_only": config.strict_append_only,
        "ttl_seconds": config.ttl_seconds,
        "sample_picker": config.sample_picker,
        "sample_postprocessor": config.sample_postprocessor,
        "matcher": config.matcher,
        "group_id": config.group_id,
        "hosted_tools": config.hosted_tools,
    }


def _config_from_json(data: dict[str, Any]) -> SessionConfig:
    roles = data["allowed_append_roles"]
    return SessionConfig(
        trajectory=TrajectoryKind(data["trajectory"]),
        chat_template_kwargs=data["chat_template_kwargs"],
        allowed_append_roles=None if roles is None else tuple(roles),
        max_nodes=data["max_nodes"],
        strict_append_only=data["strict_append_only"],
        ttl_seconds=data["ttl_seconds"],
        sample_picker=data["sample_picker"],
        sample_postprocessor=data["sample_postprocessor"],
        matcher=data.get("matcher", "strict"),  # absent in journals written before policies existed: strict then
        group_id=data.get("group_id"),  # absent in journals written before sessions had groups
        hosted_tools=data.get("hosted_tools", "drop"),  # absent in journals written before: dropped then
    )


def _json(value: object) -> bytes:
    if _orjson_safe(value, _ORJSON_SAFE_DEPTH):
        try:
            return orjson.dumps(value)
        except orjson.JSONEncodeError:  # a non-str key or an int beyond 64 bits: stdlib json decides
            pass
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


_ORJSON_SAFE_DEPTH = 64
"""Deeper values take the stdlib path (orjson refuses nesting past 255; stdlib's recursion error stays as it was)."""


def _orjson_safe(value: object, depth: int) -> bool:
    """Whether orjson writes the container `value` exactly as stdlib json would: dicts, lists and tuples (exact
    types) of str, int, bool, None and finite floats. NaN and infinity are not: orjson writes them as null, stdlib
    as `NaN`/`Infinity`, which round-trip."""
    if type(value) is dict:
        items: Iterable[object] = value.values()
    elif type(value) is list or type(value) is tuple:
        items = value
    else:
        return False
    if depth == 0:
        return False
    for item in items:
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue
        if type(item) is float:
            if not math.isfinite(item):
                return False
        elif not _orjson_safe(item, depth - 1):
            return False
    return True


def _encode_str(text: str) -> bytes:
    data = text.encode()
    if len(data) > 0xFFFF:
        raise ValueError(f"a string of {len(data)} bytes exceeds the 65535 the format allows: {text[:40]!r}...")
    return _PREFIX.pack(len(data)) + data


def _decode_str(view: memoryview, offset: int) -> tuple[str, int]:
    (length,) = _PREFIX.unpack_from(view, offset)
    start = offset + _PREFIX.size
    end = start + length
    if end > len(view):
        raise ValueError(f"string of {length} bytes at offset {offset} runs past the payload")
    return bytes(view[start:end]).decode(), end


def _encode_blob(data: bytes) -> bytes:
    return _COUNT.pack(len(data)) + data


def _decode_blob(view: memoryview, offset: int) -> tuple[bytes, int]:
    (length,) = _COUNT.unpack_from(view, offset)
    start = offset + _COUNT.size
    if start + length > len(view):
        raise ValueError(f"blob of {length} bytes at offset {offset} runs past the payload")
    return bytes(view[start : start + length]), start + length


def _encode_array(values: array[Any], typecode: str) -> bytes:
    if values.typecode != typecode:
        values = array(typecode, values)
    if _BIG_ENDIAN:
        values = array(typecode, values)
        values.byteswap()
    return _COUNT.pack(len(values)) + values.tobytes()


def _decode_array(view: memoryview, offset: int, typecode: str) -> tuple[array[Any], int]:
    (count,) = _COUNT.unpack_from(view, offset)
    values: array[Any] = array(typecode)
    start = offset + _COUNT.size
    end = start + count * values.itemsize
    if end > len(view):
        raise ValueError(f"array of {count} items at offset {offset} runs past the payload")
    values.frombytes(view[start:end])
    if _BIG_ENDIAN:
        values.byteswap()
    return values, end
