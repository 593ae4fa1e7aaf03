"""A path's ids as the arrays that hold them (each node's prompt and sampled ids), read without joining them.

A turn's prompt starts with its parent path's ids: at 32k ids, 128 KiB. Joining the path into one array for the
plan, then copying that array with the appended ids into the prompt, wrote the history twice per turn into new
memory. A plan hands `PathIds` over instead: `TitoTokenizer.merge_recorded_tokens` writes its parts once, straight
into the prompt (`tito.prompt_buffers`).

Imports nothing from tito.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterator, Sequence
from itertools import chain
from typing import TypeAlias, overload

__all__ = ["IdParts", "PathIds", "exact_ids", "joined_ids", "packed_values"]

IdParts: TypeAlias = "list[array[int]]"
"""A path's ids as the arrays that hold them, in order: each node's own prompt and sampled arrays (references, not
copies), or a copy of the part a later junction kept of one (a few sampled ids). Joined in one allocation."""


def joined_ids(parts: Sequence[array[int] | memoryview]) -> array[int]:
    """A new array of the parts' ids (int32 buffers): one join and one copy into the array, whatever the number of
    parts (an `extend` per part grew the array by 1/16 each time: 0.2-0.5 ms at 32k ids over 40-300 turns)."""
    ids: array[int] = array("i")
    ids.frombytes(b"".join(parts))
    return ids


def packed_values(typecode: str, values: Sequence[int] | Sequence[float]) -> bytes:
    """`values` as native `typecode` items (`i`: int32 ids, `f`: float32 logprobs), packed by `struct` in one C loop:
    twice as fast as `array` converting item by item. Through a `Struct` of its own, not `struct.pack`, which caches
    the compiled format of every length it is given (up to 100, ~130 B each): for lengths that rarely repeat, memory
    held and hardly reused (~0.4 B per stored token in the memory benchmark, issue 34). Raises `struct.error` for a
    value the type cannot hold."""
    return struct.Struct(f"{len(values)}{typecode}").pack(*values)


def exact_ids(ids: memoryview) -> array[int]:
    """A new `array('i')` of an int32 view's ids, of exactly their size: what a node stores for good (`frombytes`
    leaves 1/16 spare room; a slice of its result is exact)."""
    spare: array[int] = array("i")
    spare.frombytes(ids.cast("B"))
    return spare[:]


class PathIds(Sequence[int]):
    """The ids of a path, held as its parts (`array('i')` each, shared, never changed): a sequence of ints that is
    not copied to be read. Its length and its last ids are found without a join; anything else joins it."""

    __slots__ = ("_length", "parts")

    def __init__(self, parts: Sequence[array[int]] = (), length: int | None = None) -> None:
        self.parts = tuple(parts)
        self._length = sum(map(len, self.parts)) if length is None else length

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> array[int]: ...

    def __getitem__(self, index: int | slice) -> int | array[int]:
        if isinstance(index, slice):
            return self.joined()[index]
        position = index + self._length if index < 0 else index
        if not 0 <= position < self._length:
            raise IndexError(f"id {index} of a path of {self._length} ids")
        end = self._length
        for part in reversed(self.parts):  # callers read the last ids: walk from the end
            end -= len(part)
            if position >= end:
                return part[position - end]
        raise AssertionError("unreachable: the parts hold the path's length")

    def __iter__(self) -> Iterator[int]:
        return chain.from_iterable(self.parts)

    def __eq__(self, other: object) -> bool:
        """The same ids as another path's, or as an `array('i')`, however they are held."""
        if isinstance(other, PathIds):
            other = other.joined()
        return self.joined() == other if isinstance(other, array) else NotImplemented

    __hash__ = None  # type: ignore[assignment]  # compared by value, like the arrays it holds

    def joined(self) -> array[int]:
        """The ids as one new array."""
        return joined_ids(self.parts)

    def head_parts(self, count: int) -> tuple[array[int] | memoryview, ...]:
        """The parts that hold the first `count` ids; the last one cut as a view of its array (not a copy)."""
        if count == self._length:
            return self.parts
        parts: list[array[int] | memoryview] = list(self.parts)
        drop = self._length - count
        while drop > 0:
            last = parts.pop()
            if len(last) > drop:
                parts.append(memoryview(last)[: len(last) - drop])
            drop -= len(last)
        return tuple(parts)
