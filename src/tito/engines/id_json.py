"""Token ids as a JSON array for an engine request body, written from the ids' buffer, extended rather than rewritten.

A session's prompt is an `array('i')` of up to hundreds of thousands of ids, sent whole every turn. `list(ids)` and
`orjson.dumps` made a Python int per id and freed it again: ~0.5 ms per turn at 32k ids, on the server's one
event-loop thread. numpy views the array's buffer without copying and orjson writes the view's JSON directly; the
body carries the result as an `orjson.Fragment`, so the engine's JSON is byte for byte what the list gave.

Writing the whole array was still work that grows with the history (0.08 ms at 7k ids, 0.18 ms at 33k: issue 34),
though a turn's prompt is the previous prompt plus the reply and the appended ids. `PromptJson` keeps, per routing
key (the session), its latest prompts' ids and JSON; a prompt that starts with one of them (checked by a memory
compare) is written as its JSON plus the JSON of the new ids (memory copies), and its kept ids are extended in place
by the new ids' bytes (not copied whole); any other is written whole.
The kept copies cost ~10 bytes per id of each live session's latest prompt, so they are a bounded cache
(`max_bytes`, least recently used first out), never part of what a session stores.

Imports nothing from tito.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Sequence

import numpy
import orjson

__all__ = ["PROMPT_JSON_BYTES", "PromptJson", "ids_json", "prompt_json"]

_INT_TYPECODES = "bBhHiIlLqQ"
"""Integer array typecodes; numpy reads each as the same C type."""

PROMPT_JSON_BYTES = 64 << 20
"""The default bound of a `PromptJson` cache: 64 MiB holds 64 sessions' latest 100k-id prompts."""


def ids_json(ids: Sequence[int]) -> orjson.Fragment:
    """`ids` as a JSON array (`[1,2,3]`): from the buffer when it is an int array, else from its ints."""
    return orjson.Fragment(_dumps(ids))


def _dumps(ids: Sequence[int]) -> bytes:
    if isinstance(ids, array) and ids.typecode in _INT_TYPECODES:
        values: object = numpy.frombuffer(ids, dtype=ids.typecode)
    else:
        values = ids if isinstance(ids, list) else list(ids)
    return orjson.dumps(values, option=orjson.OPT_SERIALIZE_NUMPY)


class PromptJson:
    """Per routing key, its latest prompts (each: its int32 ids' bytes and its JSON), bounded to `max_bytes` in all.

    A session's conversations (a main loop, its sub-agents, side requests) interleave their turns, so each key keeps
    up to `PROMPTS_PER_KEY` prompts: a turn extends the one it starts with, or takes the oldest one's place."""

    PROMPTS_PER_KEY = 4

    def __init__(self, max_bytes: int = PROMPT_JSON_BYTES) -> None:
        self.max_bytes = max_bytes
        self._latest: OrderedDict[str, list[tuple[bytearray, bytes]]] = OrderedDict()
        self._bytes = 0
        self.extended = 0
        """How many prompts were written as an extension of an earlier one (the rest were written whole)."""

    @property
    def held_bytes(self) -> int:
        return self._bytes

    def ids_json(self, ids: Sequence[int], key: str | None) -> orjson.Fragment:
        """`ids` as a JSON array, byte for byte `ids_json(ids)`; extended from one of `key`'s earlier prompts when
        `ids` starts with it. Without a key, or for ids that are not an `array('i')`, written whole and not kept."""
        if key is None or not isinstance(ids, array) or ids.typecode != "i":
            return ids_json(ids)
        prompts = self._latest.pop(key, [])
        with memoryview(ids) as view, view.cast("B") as raw:
            for index, (known, known_text) in enumerate(prompts):
                if known and known == raw[: len(known)]:  # a bytearray compares with a buffer by memcmp, no copy
                    count = len(known) // ids.itemsize
                    tail = memoryview(_dumps(ids[count:]))[1:] if count < len(ids) else None
                    text = known_text if tail is None else b"".join((memoryview(known_text)[:-1], b",", tail))
                    self._bytes -= len(known) + len(known_text)
                    del prompts[index]
                    known += raw[len(known) :]  # extended in place: the new ids' bytes only
                    self.extended += 1
                    break
            else:
                known = bytearray(raw)
                text = _dumps(ids)
                if len(prompts) >= self.PROMPTS_PER_KEY:
                    oldest = prompts.pop(0)
                    self._bytes -= len(oldest[0]) + len(oldest[1])
        if len(known) + len(text) <= self.max_bytes:
            prompts.append((known, text))
            self._bytes += len(known) + len(text)
        if prompts:
            self._latest[key] = prompts
        while self._bytes > self.max_bytes:
            _, dropped = self._latest.popitem(last=False)
            self._bytes -= sum(len(known) + len(known_text) for known, known_text in dropped)
        return orjson.Fragment(text)

    def forget(self, key: str) -> None:
        """Drop `key`'s prompts (its session ended)."""
        self._bytes -= sum(len(known) + len(known_text) for known, known_text in self._latest.pop(key, ()))


def prompt_json(ids: Sequence[int], key: str | None, prompts: PromptJson | None) -> orjson.Fragment:
    """An engine request's prompt ids as JSON: through `prompts` (extending `key`'s previous prompt) when given,
    else written whole."""
    return ids_json(ids) if prompts is None else prompts.ids_json(ids, key)
