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

import operator
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import orjson

from tito.trajectory.events import TurnCommitted, with_changes

KEPT_VALUES = 256
"""Distinct shared values remembered (tool sets and metadata containers): a run's agents send a few."""
MEASURED_PER_TURN = frozenset({"timings"})
"""Metadata a turn measures of itself (the engine's seconds): never equal to another turn's, so never looked up; a
lookup would only encode it and put it in the table, where it would push out a value that repeats."""


class SharedValues:
    """A bounded table of values by their JSON (the key a lookup hashes and compares in C: ~20 us for an agent's
    25 tools, where a deep `==` of the objects took three times that); `share` gives a turn holding its values."""

    def __init__(self, kept: int = KEPT_VALUES) -> None:
        self._kept = kept
        self._values: OrderedDict[tuple[type, bytes], Any] = OrderedDict()
        """(type, JSON) -> the value held: the JSON is kept with it (a tool set's 15 KB, once per process)."""
        self._held_keys: dict[int, tuple[type, bytes]] = {}
        """id of each value held -> its key: a value that is itself held (a turn's tools from `held_tuple`) is
        found without being encoded again."""
        self._tuples: OrderedDict[int, tuple[Any, ...]] = OrderedDict()
        """id of a list of held items given to `held_tuple` -> the held tuple: a resent request's tools list (the
        same objects every turn) is found without being encoded."""
        self._lock = threading.Lock()
        """Journal replays may run beside the event loop's commits."""

    def share(self, turn: TurnCommitted) -> TurnCommitted:
        """`turn` with its tools and its metadata's containers (but what it measured of itself) replaced by equal
        values already held, its metadata kept as a `key_sharing_dict`."""
        metadata: dict[str, Any] = {}
        with self._lock:
            tools = self._held(turn.tools) if turn.tools else turn.tools
            for key, value in turn.metadata.items():
                shared = isinstance(value, (dict, list)) and key not in MEASURED_PER_TURN
                metadata[key] = self._held(value) if shared else value
        return with_changes(turn, tools=tools, metadata=key_sharing_dict(metadata))

    def value(self, value: Any) -> Any:
        """The held value equal to `value` (same type, same JSON; `==` too where the JSON has a null, which a NaN
        also writes), else `value`, now held."""
        with self._lock:
            return self._held(value)

    def held_tuple(self, items: Sequence[Any]) -> tuple[Any, ...]:
        """`value(tuple(items))`; a list of the held tuple's own items (a request whose tools its body's reader
        made the held ones) is remembered by its id, so the same list again (the next resent body, the plan's
        check before the commit) gives the held tuple without encoding them (~20 us for an agent's tools). A list
        of other items is not remembered: that would keep a second copy of a session's tools alive (issue 34)."""
        with self._lock:
            found = self._tuples.get(id(items))
            if found is not None and len(found) == len(items) and all(map(operator.is_, found, items)):
                self._tuples.move_to_end(id(items))
                return found
            held: tuple[Any, ...] = self._held(tuple(items))
            if len(held) == len(items) and all(map(operator.is_, held, items)):
                self._tuples[id(items)] = held
                if len(self._tuples) > self._kept:
                    self._tuples.popitem(last=False)
            return held

    def held_json(self, items: Sequence[Any]) -> bytes:
        """The JSON of `held_tuple(items)` (an array): the bytes the table keys it by, written once per process
        (a Responses reply repeats its request's tools), not once per session."""
        held = self.held_tuple(items)
        with self._lock:
            key = self._held_keys.get(id(held))
        return orjson.dumps(held) if key is None else key[1]

    def _held(self, value: Any) -> Any:
        """`value`'s work, under the lock (one acquisition for a whole turn)."""
        key = self._held_keys.get(id(value))
        if key is None:
            try:
                encoded = orjson.dumps(value)
            except TypeError:
                return value  # not JSON: never shared
            key = (type(value), encoded)
            held = self._values.get(key)
            if held is None or (b"null" in encoded and held != value):
                if held is not None:
                    del self._held_keys[id(held)]
                self._values[key] = value
                self._held_keys[id(value)] = key
                if len(self._values) > self._kept:
                    del self._held_keys[id(self._values.popitem(last=False)[1])]
                return value
            value = held
        self._values.move_to_end(key)
        return value


KEY_SHAPES = 64
"""Distinct metadata key sequences given a shared keys table; a turn of any other gets a plain dict (a server's turns
come in a few: one per dialect's additions)."""
_key_tables: dict[tuple[str, ...], type] = {}
"""A metadata key sequence -> the class whose instances' attribute dicts share its keys table."""


def key_sharing_dict(items: dict[str, Any]) -> dict[str, Any]:
    """A dict equal to `items`, in its order, whose keys table is shared with the others of the same keys: a turn's
    ~13 metadata entries cost ~170 bytes instead of ~460 (~0.5 B per stored token at 8k, issue 34), its keys stored
    once per process. It is the attribute dict of an instance of a class made for those keys (CPython's
    key-sharing dictionaries, PEP 412; the instance itself is let go), set attribute by attribute (~1 us for 13),
    as `update` would give the dict a table of its own. Keys that could name an object's own attribute
    (`__class__`) or are not all `str` give a plain copy."""
    keys = tuple(items)
    table = _key_tables.get(keys)
    if table is None:
        if len(_key_tables) >= KEY_SHAPES or not all(type(key) is str and not key.startswith("__") for key in keys):
            return dict(items)
        table = _key_tables.setdefault(keys, type("KeySharing", (), {}))
    holder = table()
    for key, value in items.items():
        setattr(holder, key, value)
    shared: dict[str, Any] = vars(holder)
    return shared


SHARED = SharedValues()
"""The process's table: every session's turns share through it, live and replayed."""
