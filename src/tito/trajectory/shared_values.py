"""What turns repeat, stored once: the request's tools and the repeated parts of each turn's metadata.

Every request carries its tools (an agent's 25 schemas: ~15 KB of JSON, ~80 KB as Python objects) and every turn's
metadata repeats the session's sampling parameters and template kwargs; kept per turn, they were most of what a
session held (issue 34). A value equal to one already held, as JSON too (`1` is not `1.0`, `-0.0` not `0.0`, a NaN
equals nothing), is stored as that object, so a turn keeps only what it adds and every reader (samples, exports,
the journal, the inspector) sees exactly the values it saw before. The table is the process's (an RL run's
sessions send the same tools), bounded (`KEPT_VALUES`, the least recently used leave it; a value that left is
still held by the turns that store it). Shared values are never mutated: events are frozen, and readers copy what
they change.

Imports nothing from tito but trajectory.events.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import orjson

from tito.trajectory.events import TurnCommitted, with_changes

KEPT_VALUES = 256
"""Distinct shared values remembered (tool sets and metadata containers): a run's agents send a few."""


class SharedValues:
    """A bounded table of values by their JSON (the key a lookup hashes and compares in C: ~20 us for an agent's
    25 tools, where a deep `==` of the objects took three times that); `share` gives a turn holding its values."""

    def __init__(self, kept: int = KEPT_VALUES) -> None:
        self._kept = kept
        self._values: OrderedDict[tuple[type, bytes], Any] = OrderedDict()
        """(type, JSON) -> the value held: the JSON is kept with it (a tool set's 15 KB, once per process)."""
        self._lock = threading.Lock()
        """Journal replays may run beside the event loop's commits."""

    def share(self, turn: TurnCommitted) -> TurnCommitted:
        """`turn` with its tools and its metadata's containers replaced by equal values already held."""
        tools = self.value(turn.tools) if turn.tools else turn.tools
        metadata: dict[str, Any] | None = None
        for key, value in turn.metadata.items():
            if isinstance(value, dict | list):
                held = self.value(value)
                if held is not value:
                    metadata = dict(turn.metadata) if metadata is None else metadata
                    metadata[key] = held
        if tools is turn.tools and metadata is None:
            return turn
        return with_changes(turn, tools=tools, metadata=turn.metadata if metadata is None else metadata)

    def value(self, value: Any) -> Any:
        """The held value equal to `value` (same type, same JSON; `==` too where the JSON has a null, which a NaN
        also writes), else `value`, now held."""
        try:
            encoded = orjson.dumps(value)
        except TypeError:
            return value  # not JSON: never shared
        key = (type(value), encoded)
        with self._lock:
            held = self._values.get(key)
            if held is not None and (b"null" not in encoded or held == value):
                self._values.move_to_end(key)
                return held
            self._values[key] = value
            if len(self._values) > self._kept:
                self._values.popitem(last=False)
        return value


SHARED = SharedValues()
"""The process's table: every session's turns share through it, live and replayed."""
