"""Where the members of a JSON object and the elements of an array start and end in a body's text.

A resent body is read from where the previous body's bytes part (`server.sessions.resent_prefix`), which needs the
ends of the conversation array's elements and of the object's members after it, not the values themselves: each
value is stepped over with the standard library's C scanner (`raw_decode`). Positions are of the decoded text;
`byte_offsets` turns them into offsets of the body's UTF-8 bytes. ValueError for anything not well-formed.

Imports nothing from tito.
"""

from __future__ import annotations

import json
import re
from typing import NamedTuple

Member = tuple[str, int, int]
"""A member of an object: its key, and where its value starts and ends."""
Cut = tuple[str, int, int, int]
"""A member of an object before another: its key, where its key starts, where its value starts, and where the next
member's key starts (the object without it lacks what is between its key's start and the next's)."""

_SPACE = re.compile(r"[ \t\n\r]*")
_decoder = json.JSONDecoder()


def space(text: str, at: int) -> int:
    """The position of the first character from `at` on that is not JSON whitespace."""
    match = _SPACE.match(text, at)
    return match.end() if match else at


class Located(NamedTuple):
    """Where a JSON object's array and its other members are (`find_array`)."""

    opened: int
    """Just after the array's `[`."""
    ends: list[int]
    """Each element's end."""
    close: int
    """The `]`."""
    before: list[Cut]
    """The members before the array's key."""
    after: list[Member]
    """The members after the array."""


def find_array(text: str, key: str) -> Located:
    """In a JSON object: `key`'s array and the members before and after it (the last occurrence of `key`, as the
    JSON readers keep the last of duplicate keys)."""
    at = space(text, 0)
    if text[at : at + 1] != "{":
        raise ValueError("not an object")
    at = space(text, at + 1)
    if text[at : at + 1] == "}":
        raise ValueError("no array")
    found: tuple[int, list[int], int] | None = None
    members: list[tuple[str, int, int, int]] = []  # each member's name, key's start, value's start and end
    array = -1
    following: int | None = at
    while following is not None:
        name, start = _member_key(text, following)
        if name == key and text[start : start + 1] == "[":
            _, ends, close = continue_array(text, start + 1, True)
            found, end, array = (start + 1, ends, close), close + 1, len(members)
        else:
            _, end = _decoder.raw_decode(text, start)
        members.append((name, following, start, end))
        following = _next_member(text, end)
    if found is None:
        raise ValueError("no array")
    before = [
        (name, key_at, start, members[index + 1][1]) for index, (name, key_at, start, _) in enumerate(members[:array])
    ]
    after = [(name, start, end) for name, _, start, end in members[array + 1 :]]
    return Located(*found, before, after)


def members_after(text: str, at: int) -> list[Member]:
    """From just after a member's value: each later member of the object, to its `}`."""
    members: list[Member] = []
    following = _next_member(text, at)
    while following is not None:
        name, start = _member_key(text, following)
        _, end = _decoder.raw_decode(text, start)
        members.append((name, start, end))
        following = _next_member(text, end)
    return members


def continue_array(text: str, at: int, empty: bool) -> tuple[list[int], list[int], int]:
    """From just after an array's `[` (`empty`) or just after one of its elements: each further element's start
    and end and the closing `]`'s position."""
    starts: list[int] = []
    ends: list[int] = []
    at = space(text, at)
    while text[at : at + 1] != "]":
        if not empty or ends:
            if text[at : at + 1] != ",":
                raise ValueError("no comma")
            at = space(text, at + 1)
        starts.append(at)
        _, at = _decoder.raw_decode(text, at)
        ends.append(at)
        at = space(text, at)
    return starts, ends, at


def byte_offsets(text: str, positions: list[int], base: int, start: int = 0) -> list[int]:
    """Ascending character positions of `text` from `start` on as byte offsets of its UTF-8 encoding, `start`'s
    being `base`."""
    offsets, at, byte = [], start, base
    for position in positions:
        byte += len(text[at:position].encode())
        at = position
        offsets.append(byte)
    return offsets


def members_in_bytes(text: str, members: list[Member], start: int = 0, base: int = 0) -> list[Member]:
    """`members` (from `start` on) with byte offsets of `text`'s UTF-8 encoding for positions, `start`'s being
    `base`."""
    offsets = byte_offsets(text, [place for _, first, end in members for place in (first, end)], base, start)
    return [(name, offsets[2 * index], offsets[2 * index + 1]) for index, (name, _, _) in enumerate(members)]


def _member_key(text: str, at: int) -> tuple[str, int]:
    """At a member's key: the key and where its value starts."""
    if text[at : at + 1] != '"':
        raise ValueError("no key")
    name, at = _decoder.raw_decode(text, at)
    at = space(text, at)
    if text[at : at + 1] != ":":
        raise ValueError("no colon")
    return name, space(text, at + 1)


def _next_member(text: str, at: int) -> int | None:
    """After a member's value: where the next member's key starts, or None at the object's `}`."""
    at = space(text, at)
    if text[at : at + 1] == "}":
        return None
    if text[at : at + 1] != ",":
        raise ValueError("no comma")
    return space(text, at + 1)
