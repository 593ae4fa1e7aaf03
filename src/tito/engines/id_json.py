"""Token ids as a JSON array for an engine request body, written from the ids' buffer, extended rather than rewritten.

A session's prompt is an int32 buffer (`tito.prompt_buffers`) of up to hundreds of thousands of ids, sent whole
every turn. `list(ids)` and `orjson.dumps` made a Python int per id and freed it again: ~0.5 ms per turn at 32k ids,
on the server's one event-loop thread. numpy views the buffer without copying and orjson writes the view's JSON
directly; the body carries the result as an `orjson.Fragment`, so the engine's JSON is byte for byte what the list gave.

Writing the whole array was still work that grows with the history (0.08 ms at 7k ids, 0.18 ms at 33k: issue 34),
though a turn's prompt is the previous prompt plus the reply and the appended ids. `PromptJson` keeps, per routing
key (the session), its latest prompts' ids and JSON; a prompt that starts with one of them (checked by a memory
compare) is that prompt's JSON plus the JSON of the new ids, kept in pieces (`PromptText`) that `body_json` puts
among the request body's pieces, which the connection pool writes to the socket as they are: the prompt's JSON is
not copied (a text of its own, then `orjson.dumps` of a body holding it as an `orjson.Fragment`, copied it twice;
joining the pieces into the body, once); its kept ids are extended in place by the new ids' bytes (not copied
whole). Any other prompt is written whole.
The kept copies cost ~10 bytes per id of each live session's latest prompt, so they are a bounded cache
(`max_bytes`, least recently used first out), never part of what a session stores.

Imports nothing from tito.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard

import numpy
import orjson

__all__ = ["PROMPT_JSON_BYTES", "PromptJson", "PromptText", "body_json", "ids_json", "prompt_json"]

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
    elif isinstance(ids, memoryview) and ids.format in _INT_TYPECODES:
        values = numpy.frombuffer(ids, dtype=ids.format)
    else:
        values = ids if isinstance(ids, list) else list(ids)
    return orjson.dumps(values, option=orjson.OPT_SERIALIZE_NUMPY)


class PromptText:
    """A prompt's JSON array in pieces: `[` and an earlier prompt's ids, then per extension `,` and the new ids; the
    closing `]` comes after them. Immutable: a body holding it is written as it was when made."""

    __slots__ = ("pieces", "size")

    MAX_PIECES = 64
    """More pieces are joined into one (a copy every 32 extensions), so a long session's join stays short."""

    def __init__(self, pieces: tuple[bytes | memoryview, ...], size: int) -> None:
        self.pieces = pieces
        self.size = size
        """The JSON's length in bytes."""

    @classmethod
    def whole(cls, text: bytes) -> PromptText:
        """A JSON array written whole."""
        return cls((memoryview(text)[:-1],), len(text))

    def extended(self, tail: bytes) -> PromptText:
        """This array followed by the ids of the JSON array `tail`."""
        pieces = (*self.pieces, b",", memoryview(tail)[1:-1])
        if len(pieces) > self.MAX_PIECES:
            pieces = (b"".join(pieces),)
        return PromptText(pieces, self.size + len(tail) - 1)


def body_json(body: Mapping[str, Any]) -> list[bytes | memoryview]:
    """`orjson.dumps(body)` in pieces (byte for byte when joined), where a top-level value may also be a `PromptText`:
    its pieces stand where its JSON array would, uncopied; the connection pool writes the pieces as they are."""
    items = list(body.items())
    index = next((index for index, (_, value) in enumerate(items) if type(value) is PromptText), None)
    if index is None:
        return [orjson.dumps(body)]
    name, prompt = items[index]
    head = orjson.dumps(dict(items[:index]))[:-1]  # `{` and the fields before, without the `}`
    rest = orjson.dumps(dict(items[index + 1 :]))[1:]  # the fields after and the `}`
    opening = b"%s%s%s:" % (head, b"," if index else b"", orjson.dumps(name))
    closing = (b"]," if len(rest) > 1 else b"]") + rest
    return [opening, *prompt.pieces, closing]


class PromptJson:
    """Per routing key, its latest prompts (each: its int32 ids' bytes and its JSON), bounded to `max_bytes` in all.

    A session's conversations (a main loop, its sub-agents, side requests) interleave their turns, so each key keeps
    up to `PROMPTS_PER_KEY` prompts: a turn extends the one it starts with, or takes the oldest one's place."""

    PROMPTS_PER_KEY = 4

    def __init__(self, max_bytes: int = PROMPT_JSON_BYTES) -> None:
        self.max_bytes = max_bytes
        self._latest: OrderedDict[str, list[tuple[bytearray, PromptText]]] = OrderedDict()
        self._bytes = 0
        self.extended = 0
        """How many prompts were written as an extension of an earlier one (the rest were written whole)."""

    @property
    def held_bytes(self) -> int:
        return self._bytes

    def ids_json(self, ids: Sequence[int], key: str | None) -> orjson.Fragment | PromptText:
        """`ids` as a JSON array (for `body_json`), byte for byte `ids_json(ids)`; extended from one of `key`'s
        earlier prompts when `ids` starts with it. Without a key, or for ids that are not int32 (`_is_int32`), written
        whole and not kept."""
        if key is None or not _is_int32(ids):
            return ids_json(ids)
        prompts = self._latest.pop(key, [])
        with memoryview(ids) as view, view.cast("B") as raw:
            for index, (known, known_text) in enumerate(prompts):
                if known and known == raw[: len(known)]:  # a bytearray compares with a buffer by memcmp, no copy
                    count = len(known) // ids.itemsize
                    text = known_text.extended(_dumps(ids[count:])) if count < len(ids) else known_text
                    self._bytes -= len(known) + known_text.size
                    del prompts[index]
                    known += raw[len(known) :]  # extended in place: the new ids' bytes only
                    self.extended += 1
                    break
            else:
                known = bytearray(raw)
                text = PromptText.whole(_dumps(ids))
                if len(prompts) >= self.PROMPTS_PER_KEY:
                    oldest = prompts.pop(0)
                    self._bytes -= len(oldest[0]) + oldest[1].size
        if len(known) + text.size <= self.max_bytes:
            prompts.append((known, text))
            self._bytes += len(known) + text.size
        if prompts:
            self._latest[key] = prompts
        while self._bytes > self.max_bytes:
            _, dropped = self._latest.popitem(last=False)
            self._bytes -= sum(len(known) + known_text.size for known, known_text in dropped)
        return text

    def forget(self, key: str) -> None:
        """Drop `key`'s prompts (its session ended)."""
        self._bytes -= sum(len(known) + known_text.size for known, known_text in self._latest.pop(key, ()))


def _is_int32(ids: Sequence[int]) -> TypeGuard[array[int] | memoryview]:
    """An `array('i')` or an int32 view (a prompt from `tito.prompt_buffers`)."""
    return (isinstance(ids, array) and ids.typecode == "i") or (isinstance(ids, memoryview) and ids.format == "i")


def prompt_json(ids: Sequence[int], key: str | None, prompts: PromptJson | None) -> orjson.Fragment | PromptText:
    """An engine request's prompt ids as JSON (a body holding it is written by `body_json`): through `prompts`
    (extending `key`'s previous prompt) when given, else written whole."""
    return ids_json(ids) if prompts is None else prompts.ids_json(ids, key)
