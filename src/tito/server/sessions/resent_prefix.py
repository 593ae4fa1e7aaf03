"""A resent conversation read from where the previous request's bytes end, not from its first byte.

Agents resend the whole conversation every turn; the leading bytes of a turn's body are most often the previous
turn's body up to (nearly) the end of its conversation array (`messages`, `input`). `ResentPrefix` keeps, for one
route of one session, what it needs of the last body of each of its last CONVERSATIONS conversations (a sub-agent's
turns come between the main loop's): the byte offsets where the array's last few elements end, the fingerprint's
xxh3-128 state of the body at each of those offsets, the validated elements, and the body's bytes from the first of
those offsets to the array's `]` (the last few elements), with xxh3-128 digests of the bytes before and after them
(`_Last`). A body whose bytes before the first offset digest alike and whose bytes from there are the kept ones up
to such an offset is read from there: only the new elements are parsed and validated (alone, the request's other
fields reused, when the bytes after the array digest as the old body's: the array's `]` is then where those bytes
start, so the validator is the one parser of the new elements, and of their ends only the last is found, the earlier
ones scanned for only when a later body parts before it; when the members after the array are the old body's up to
some member, Codex's `client_metadata` changing every turn, likewise, with the array's `]` found by the first
member's leading bytes and the request validated from a body built of the head, the new elements and the members but
the unchanged arrays and objects before the change, which are the previous request's: an agent's tools are not
validated again (`_Members`), nor the arrays, objects and long strings before the array, Codex's instructions among
them (`_Head`); else in a body built of the head, the new elements and the rest, their ends scanned),
the earlier elements are the validated ones already held, and the fingerprint is the held
digest state updated with the rest of the body: the same digest a whole read gives. Any other body (the first, one
whose earlier bytes changed, one whose new elements are invalid: the whole read names the error's place) is read
whole, and its offsets are found for the next turn. Kept offsets: the last KEPT elements, so a client that rewrites
its last few messages each turn (Claude Code moves its `cache_control` marks) still reads from the first one it
rewrote.

Digests, not the bytes, stand for the history and the request's later fields (an agent's tools): keeping each
previous body whole cost about 5 bytes per token of history (issue 34). xxh3 runs at memory speed (as fast as the
memcmp it replaces); a changed head that digests alike would be read as the old one: 2^-128 by chance, and only a
client crafting a collision against its own session's bytes could cause one. `hold` lets the session put its own
equal objects (a resent reply) in place of newly validated elements, so the elements kept are not a second copy.
A dialect that translates its elements to chat messages puts a `Settled` stand-in in place of each element it
translated (`settle`): a later resend reuses that translation, found by the stand-ins' identity, and a request whose
stand-ins no kept translation covers is read whole again (`read_whole`).

A request read from the prefix with some of its later members left out of the validation is right only where
`validate` checks each field alone, as pydantic's field types and the dialects' parse checks do: a check across
fields belongs after the read.

What the per-turn path still does in proportion to the history: digesting the body's head once, to compare it (~8 us
at 100k tokens; the head digest kept for the next turn is the first kept mark's fingerprint state, the same xxh3-128
of the same bytes), and a shallow copy of the list of element references.

Imports from tito: server.sessions.json_spans.
"""

from __future__ import annotations

import array
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

import xxhash

from tito.server.sessions import json_spans

Request = TypeVar("Request")
KEPT = 4
"""How many of the array's last element ends a body can be read from."""
CONVERSATIONS = 3
"""How many previous bodies (of different conversations on the session) a body can be read from."""
_SPACE_BYTES = frozenset(b" \t\n\r")
_SEPARATOR = re.compile(rb"[ \t\n\r]*,[ \t\n\r]*")


class Settled:
    """Stands in for an element a dialect has translated (`settle`): the reader's kept elements and the dialect's
    kept translation then hold this, not the element's parsed JSON (a second copy of what the session stores as
    chat messages). Only its identity is read: which kept translation a resend continues, element by element."""

    __slots__ = ()


def settle(elements: list[Any], start: int, stop: int) -> None:
    """Put a fresh stand-in in place of each of `elements[start:stop]`, in place: the list is the one the reader
    keeps and the request holds, so the next body read from the prefix holds the same stand-ins."""
    elements[start:stop] = [Settled() for _ in range(start, stop)]


def holds_settled(elements: list[Any], start: int = 0) -> bool:
    """Whether any of `elements[start:]` is a stand-in (the request must then be read whole to be translated)."""
    return any(type(element) is Settled for element in elements[start:])


@dataclass(frozen=True)
class _Mark:
    """Where one element of the array ends in the body: its byte offset, the element count up to it, and the
    fingerprint's xxh3-128 state of the body's bytes before it."""

    offset: int
    count: int
    digest: Any  # an xxhash.xxh3_128 state


@dataclass(frozen=True)
class _Last:
    """A previous body, not kept whole: its bytes from its first kept mark to the array's `]` (`tail`: the last
    KEPT elements) and the xxh3-128 digests of the bytes before (`head`) and after (`rest`: the request's later
    fields, an agent's tools among them)."""

    length: int
    base: int
    """The first mark's offset: where `tail` starts in the body."""
    head: bytes
    tail: bytes
    rest: bytes
    array_open: int
    """Byte offset just after the array's `[`."""
    close: int
    """Byte offset of the array's `]`: what follows it (the request's later fields) is the rest."""
    marks: tuple[_Mark, ...]
    """The last KEPT element ends (or the array's opening when it is empty), in order."""
    elements: list[Any]
    request: Any
    members: _Members | None
    """The members of the rest, when they are known."""
    head_members: _Head
    """The members before the array a read from the prefix takes from the previous request."""


@dataclass(frozen=True, slots=True)
class _Members:
    """The members after a previous body's array, by byte offsets from its `]`: a body whose later members changed
    (Codex's `client_metadata` does every turn) is read without validating again the arrays and objects of the
    members before the change (an agent's tools, tens of kilobytes)."""

    lead: bytes
    """The bytes from the `]` to the first member's value (`],"tools":`): a body's `]` is where they next occur
    after its new elements (at a wrong place those would be no valid array, and the body is read another way)."""
    names: tuple[str, ...]
    ends: array.array[int]
    """Where each member's value ends."""
    digests: bytes
    """The xxh3-128 digest of the bytes from the `]` to each end, 16 bytes each."""
    containers: int
    """Bit i set: member i's value is an array or an object."""
    unique: int
    """Bit i set: member i's value is an array or an object and no other member has its name."""

    def unchanged(self, body: bytes, close: int) -> tuple[int, Any]:
        """How many of the members are, from `close` on, `body`'s bytes too, and the xxh3-128 state of those bytes.
        The members but the last are tried first, in one digest: Codex changes only its last (`client_metadata`)."""
        if len(self.ends) > 1 and close + self.ends[-2] <= len(body):
            state = xxhash.xxh3_128(memoryview(body)[close : close + self.ends[-2]])
            if state.digest() == self.digests[-32:-16]:
                return self._unchanged_from(body, close, len(self.ends) - 1, state)
        return self._unchanged_from(body, close, 0, xxhash.xxh3_128())

    def _unchanged_from(self, body: bytes, close: int, count: int, state: Any) -> tuple[int, Any]:
        """`unchanged`, the first `count` members known unchanged (`state`: the xxh3-128 of their bytes)."""
        at = close + self.ends[count - 1] if count else close
        for index in range(count, len(self.ends)):
            end = close + self.ends[index]
            if end > len(body):
                return index, state
            trial = state.copy()
            trial.update(memoryview(body)[at:end])
            if trial.digest() != self.digests[16 * index : 16 * index + 16]:
                return index, state
            state, at = trial, end
        return len(self.ends), state

    def reusable(self, count: int, later_names: set[str], key: str) -> list[str]:
        """The names of the first `count` members whose values, unchanged, are the previous request's: arrays and
        objects whose name no other member after the array repeats, in the previous body or in this one (its later
        members' names `later_names`): the last of duplicate names is the value. Never `key`."""
        return [
            name
            for index, name in enumerate(self.names[:count])
            if self.unique >> index & 1 and name != key and name not in later_names
        ]

    def continued(
        self, body: bytes, close: int, count: int, state: Any, later: list[json_spans.Member]
    ) -> _Members | None:
        """The first `count` of these members (`state`: the xxh3-128 of `body`'s bytes from `close` to their end,
        advanced here to the last member's end) followed by `later` (byte offsets in `body`); None when none."""
        if count == 0 and not later:
            return None
        at = close + self.ends[count - 1] if count else close
        digests = [self.digests[: 16 * count]]
        containers = self.containers & ((1 << count) - 1)
        for index, (_, start, end) in enumerate(later, count):
            state.update(memoryview(body)[at:end])
            digests.append(state.digest())
            containers |= (body[start] in _CONTAINER_OPENINGS) << index
            at = end
        ends = array.array("q", self.ends[:count])
        ends.extend(end - close for _, _, end in later)
        lead = self.lead if count else body[close : later[0][1]]
        later_names = tuple(name for name, _, _ in later)
        if later_names == self.names[count:] and containers == self.containers:  # the same members: one changed
            return _Members(lead, self.names, ends, b"".join(digests), containers, self.unique)
        names = (*self.names[:count], *map(sys.intern, later_names))
        unique = sum(
            1 << index for index, name in enumerate(names) if containers >> index & 1 and names.count(name) == 1
        )
        return _Members(lead, names, ends, b"".join(digests), containers, unique)


_NO_MEMBERS = _Members(b"", (), array.array("q"), b"", 0, 0)
_CONTAINER_OPENINGS = frozenset(b"[{")
_LONG = 256
"""Characters from which a string member before the array is taken from the previous request, not validated again."""


@dataclass(frozen=True, slots=True)
class _Head:
    """The members before a body's array that a read validating its whole request (_with_changed_members) takes from
    the previous request, as the head's bytes are the previous body's: arrays, objects and strings of _LONG characters
    or more (Codex's instructions, a hundred kilobytes) whose name no other member of the body has. By the byte spans
    that leaving each out of the body removes: from its key to the next member's."""

    names: tuple[str, ...]
    cuts: array.array[int]
    """Each member's span, two offsets each."""

    def left_out(self, body: bytes, end: int, later_names: set[str]) -> tuple[list[bytes], list[str]]:
        """`body`'s bytes to `end` without the members whose name no member after the array has, in this body or the
        previous one (`later_names`), and their names."""
        pieces, names, at = [], [], 0
        for index, name in enumerate(self.names):
            if name not in later_names:
                pieces.append(body[at : self.cuts[2 * index]])
                names.append(name)
                at = self.cuts[2 * index + 1]
        pieces.append(body[at:end])
        return pieces, names


_NO_HEAD = _Head((), array.array("q"))


def _head(text: str, located: json_spans.Located, key: str) -> tuple[list[int], list[str]]:
    """The character spans (two positions each) and names of the members before a body's array that a later read
    can take from its request (_Head)."""
    names = [name for name, _, _, _ in located.before] + [name for name, _, _ in located.after]
    spans: list[int] = []
    kept: list[str] = []
    for name, key_at, start, following in located.before:
        opening = text[start]
        if (
            name != key
            and names.count(name) == 1
            and (opening in "[{" or (opening == '"' and following - start >= _LONG))
        ):
            spans += (key_at, following)
            kept.append(sys.intern(name))
    return spans, kept


@dataclass(frozen=True)
class ReadBody(Generic[Request]):
    """A request body read: the validated request and the xxh3-128 digest of the whole body (unfinalised: the
    request's fingerprint, server.turns.retries)."""

    request: Request
    digest: Any
    from_prefix: bool
    """True when it was read from the previous body's prefix (for tests and counts)."""


class ResentPrefix(Generic[Request]):
    """One route's previous body on one session, and reading the next body from where they part.

    `validate` parses and validates a whole body (raising the route's error for a bad one), `validate_elements`
    a JSON array of elements alone (used when the fields after the array are the previous body's bytes too: the
    request's other fields are then the previous request's); `elements` and `with_elements` read and set the
    validated request's conversation array; `hold` replaces, in place, newly validated elements by equal ones the
    session already stores (a resent reply), so that what the reader keeps is not a second copy of them."""

    def __init__(
        self,
        key: str,
        validate: Callable[[bytes], Request],
        validate_elements: Callable[[bytes], list[Any]],
        elements: Callable[[Request], list[Any]],
        with_elements: Callable[[Request, list[Any]], Request],
        hold: Callable[[list[Any]], None] = lambda elements: None,
    ) -> None:
        self.key = key
        self.validate = validate
        self.validate_elements = validate_elements
        self.elements = elements
        self.with_elements = with_elements
        self.hold = hold
        self._lasts: list[_Last] = []
        """The last bodies of the session's last few conversations (a sub-agent's turns come between the main
        loop's), the most recent first."""

    def read(self, body: bytes) -> ReadBody[Request]:
        """The validated request and its digest; from a previous body's prefix when it is one, else whole."""
        head: tuple[int, _Mark] | None = None
        for index in range(len(self._lasts)):
            mark = self._shared_mark(body, index)
            if mark is None:
                continue
            if mark.count == 0:  # only the head shared: another conversation (a sub-agent's), read from that
                head = head or (index, mark)  # head only when no kept body shares an element
            elif (read := self._read_tail(body, self._lasts[index], mark)) is not None:
                self._remember(read[1], index)
                return read[0]
        if head is not None and (read := self._read_tail(body, self._lasts[head[0]], head[1])) is not None:
            self._remember(read[1], None)
            return read[0]
        return self.read_whole(body)

    def read_whole(self, body: bytes) -> ReadBody[Request]:
        """`body` read whole, its marks kept for the next body. A dialect reads a body whole again when the request
        read from the prefix holds `Settled` stand-ins it cannot translate from its kept translation."""
        request = self.validate(body)
        self.hold(self.elements(request))
        digest = xxhash.xxh3_128(body)
        located = _locate(body, self.key, self.elements(request), request)
        if located is not None:
            self._remember(located, None)
        return ReadBody(request, digest, False)

    def _shared_mark(self, body: bytes, index: int) -> _Mark | None:
        """The last mark of the `index`th kept body up to which `body` is that body's bytes. When the next mark is
        more than one element on (a read from the end marked only its new elements' last end), the element ends
        between are found first (_filled): `body` may part at one of them."""
        last = self._lasts[index]
        if len(body) < last.base or xxhash.xxh3_128_digest(memoryview(body)[: last.base]) != last.head:
            return None
        at = len(last.marks) - 1
        while at >= 0:
            if body.startswith(memoryview(last.tail)[: last.marks[at].offset - last.base], last.base):
                filled = _filled(last, at)
                if filled is last:
                    return last.marks[at]
                at += len(filled.marks) - len(last.marks)  # the last end found: the loop goes back from there
                last = self._lasts[index] = filled
            else:
                at -= 1
        return None

    def _remember(self, last: _Last, replacing: int | None) -> None:
        if replacing is not None:
            del self._lasts[replacing]
        self._lasts.insert(0, last)
        del self._lasts[CONVERSATIONS:]

    def _read_appended(self, body: bytes, last: _Last, mark: _Mark) -> tuple[ReadBody[Request], _Last] | None:
        """The usual resend read without scanning its new elements: when `body` ends with the previous body's bytes
        after its array, the array's `]` is where they start, the new elements (from `mark` to it) are validated at
        once and only the last one's end is marked (the others are found when a later body parts before it:
        _filled). When only some of the members after the array changed, the `]` is where the first member's lead
        is next found (_with_changed_members). None: neither case, or its new elements do not validate (_read_tail's
        scan decides)."""
        close = len(body) - (last.length - last.close)
        same_rest = close > mark.offset and _rest_is(last, body, close)
        if not same_rest and (last.members is None or (close := body.find(last.members.lead, mark.offset)) < 0):
            return None
        first = mark.offset
        if mark.count > 0:
            separator = _SEPARATOR.match(body, first)
            if separator is None:
                return None
            first = separator.end()
        end = close
        while end > first and body[end - 1] in _SPACE_BYTES:
            end -= 1
        if end <= first:
            return None
        if same_rest:
            try:
                new = self.validate_elements(b"[" + body[first:close] + b"]")
            except Exception:
                return None
            request, rest, members = last.request, last.rest, last.members
        else:
            changed = self._with_changed_members(body, last, first, close)
            if changed is None:
                return None
            request, new, rest, members = changed
        self.hold(new)
        elements = last.elements[: mark.count] + new
        request = self.with_elements(request, elements)
        kept = list(last.marks[: last.marks.index(mark) + 1])
        marks = _extend(kept, body, [(end, len(elements))])
        digest = marks[-1].digest.copy()  # each byte of the tail hashed once: to the new mark, then the rest
        digest.update(memoryview(body)[end:])
        kept_last = _last(body, last.array_open, close, marks, elements, request, last.head_members, rest, members)
        return ReadBody(request, digest, True), kept_last

    def _with_changed_members(
        self, body: bytes, last: _Last, first: int, close: int
    ) -> tuple[Request, list[Any], bytes, _Members | None] | None:
        """The request of `body`, whose array's new elements start at `first` and whose `]` is at `close`, when its
        members after the array are the previous body's up to some member and differ from there: validated from its
        head but its long members (_Head), its new elements, the scalars of the members before the change and the
        members from it on, with the members left out taken from the previous request (`validate` checks each field
        alone, so leaving them out changes nothing else). When the members from the change on are the previous body's
        names in their order (Codex's `client_metadata`, new every turn), the request is the previous one with their
        values: every other member is the previous body's bytes. Also the new elements, the xxh3-128 digest of the
        bytes from `close` on and the members for the next body. None: the first member changed too, or the body is
        not valid."""
        assert last.members is not None
        count, state = last.members.unchanged(body, close)
        if count == 0:
            return None
        at = close + last.members.ends[count - 1]
        try:
            text = body[at:].decode()
            later = json_spans.members_in_bytes(text, json_spans.members_after(text, 0), 0, at)
        except (ValueError, UnicodeDecodeError):
            return None
        later_names = {name for name, _, _ in later}
        reused = last.members.reusable(count, later_names, self.key)
        pieces, head_reused = last.head_members.left_out(  # a head member is its request's value if no later one is
            body, last.array_open, {*last.members.names, *later_names}
        )
        pieces += (body[first:close], b"]")
        for index, name in enumerate(last.members.names[:count]):
            if name not in reused:
                start = close + (last.members.ends[index - 1] if index else 1)
                pieces.append(body[start : close + last.members.ends[index]])
        pieces.append(body[at:])
        try:
            parsed: Any = self.validate(b"".join(pieces))  # a pydantic model, as _with_equal_fields_of reads it
            later_in_order = tuple(name for name, _, _ in later)
            if later_in_order == last.members.names[count:] and self.key not in later_names:
                request = _with_values_of(parsed, last.request, later_in_order)
            else:
                left_out = {name: _value(last.request, name) for name in (*head_reused, *reused)}
                request = _with_equal_fields_of(parsed, last.request, self.key, left_out)
        except Exception:
            return None
        members = last.members.continued(body, close, count, state, later)
        state.update(memoryview(body)[later[-1][2] if later else at :])
        return request, self.elements(parsed), state.digest(), members

    def _read_tail(self, body: bytes, last: _Last, mark: _Mark) -> tuple[ReadBody[Request], _Last] | None:
        """`body` read from `mark` on (its bytes before it are the previous body's); None: read it whole (also
        when the new elements are invalid, so the error names their place in the whole array). The new elements
        are scanned for their ends only when the bytes after the array changed (else _read_appended)."""
        appended = self._read_appended(body, last, mark)
        if appended is not None:
            return appended
        try:
            tail = body[mark.offset :].decode()
            starts, ends, close = json_spans.continue_array(tail, 0, mark.count == 0)
        except (ValueError, UnicodeDecodeError):
            return None
        if not ends:  # no new element: the same body again (a retry) reads as before; anything else whole
            same = (
                len(body) == last.length and body.startswith(last.tail, last.base) and _rest_is(last, body, last.close)
            )
            if not same or mark is not last.marks[-1]:
                return None
            digest = mark.digest.copy()
            digest.update(memoryview(body)[mark.offset :])
            return ReadBody(last.request, digest, True), last
        first, *element_ends, close_at = json_spans.byte_offsets(tail, [starts[0], *ends, close], mark.offset)
        if len(body) - close_at == last.length - last.close and _rest_is(last, body, close_at):
            return None  # the rest is the previous body's: _read_appended validated these new elements, invalid
        try:
            new = self.validate(body[: last.array_open] + body[first:])
        except Exception:
            return None
        self.hold(self.elements(new))
        elements = last.elements[: mark.count] + self.elements(new)
        request = self.with_elements(_with_equal_fields_of(new, last.request, self.key), elements)
        kept = list(last.marks[: last.marks.index(mark) + 1])
        marks = _extend(kept, body, [(end, mark.count + i + 1) for i, end in enumerate(element_ends)])
        digest = marks[-1].digest.copy()  # each byte of the tail hashed once: to the last mark, then the rest
        digest.update(memoryview(body)[marks[-1].offset :])
        kept_last = _last(body, last.array_open, close_at, marks, elements, request, last.head_members)
        return ReadBody(request, digest, True), kept_last


def _with_equal_fields_of(request: Any, previous: Any, key: str, update: dict[str, Any] | None = None) -> Any:
    """`request` (a pydantic model) with each declared field but the array `key` that equals `previous`'s holding
    `previous`'s very object, and the values `update` names (in one copy). A body whose bytes after the array changed
    (Codex's `client_metadata` does every turn) has its other fields parsed again: equal values, new objects, a second
    copy of what a session keeps and no translation a dialect can find by identity."""
    equal = update if update is not None else {}
    for name in _field_names(type(request)):
        if name == key or name in equal:
            continue
        if (old := getattr(previous, name)) is not (new := getattr(request, name)) and old == new:
            equal[name] = old
    return request.model_copy(update=equal) if equal else request


def _with_values_of(request: Any, previous: Any, names: Sequence[str]) -> Any:
    """`previous` (a pydantic model) with the members `names` as `request` has them where they differ (an equal
    value stays `previous`'s very object, as in `_with_equal_fields_of`)."""
    update = {}
    for name in names:
        new = _value(request, name)
        try:
            if _value(previous, name) == new:
                continue
        except KeyError:  # an extra member the previous request did not have
            pass
        update[name] = new
    return previous.model_copy(update=update) if update else previous


def _field_names(model: Any) -> tuple[str, ...]:
    """A pydantic model's declared fields (pydantic's `model_fields` is a property, not free to read each turn)."""
    names = _FIELD_NAMES.get(model)
    if names is None:
        names = _FIELD_NAMES[model] = tuple(model.model_fields)
    return names


_FIELD_NAMES: dict[Any, tuple[str, ...]] = {}


def _value(request: Any, name: str) -> Any:
    """A pydantic request's value of the member `name`: a declared field's, or an extra one's (KeyError: none)."""
    return getattr(request, name) if name in _field_names(type(request)) else request.model_extra[name]


def _filled(last: _Last, at: int) -> _Last:
    """`last` with marks at the element ends between its `at`th mark and the next, of its last KEPT elements: the
    ends a read from the end (_read_appended) left unfound, found by scanning (the array was read, so its JSON is
    valid); `last` itself when there are none."""
    marks = last.marks
    if at + 1 == len(marks) or marks[at + 1].count - 1 <= max(marks[at].count, marks[-1].count - KEPT):
        return last
    start, following = marks[at], marks[at + 1]
    try:
        text = last.tail[start.offset - last.base : following.offset - last.base].decode() + "]"
        _, ends, _ = json_spans.continue_array(text, 0, start.count == 0)
    except (ValueError, UnicodeDecodeError):  # a guard: whole reads and validated slices are valid JSON
        return last
    if len(ends) != following.count - start.count:
        return last
    counted = zip(
        json_spans.byte_offsets(text, ends[:-1], start.offset), range(start.count + 1, following.count), strict=True
    )
    between = [(end, count) for end, count in counted if count > marks[-1].count - KEPT]
    found = _marked(start, last.tail, between, last.base)
    return replace(last, marks=(*marks[: at + 1], *found, *marks[at + 1 :]))


def _marked(previous: _Mark, body: bytes, ends: list[tuple[int, int]], base: int = 0) -> list[_Mark]:
    """A mark at each of `ends` (byte offset, element count) after `previous`, each digest `previous`'s updated;
    `body` holds the body's bytes from offset `base` on."""
    marks = []
    for end, count in ends:
        digest = previous.digest.copy()
        digest.update(memoryview(body)[previous.offset - base : end - base])
        previous = _Mark(end, count, digest)
        marks.append(previous)
    return marks


def _extend(marks: list[_Mark], body: bytes, ends: list[tuple[int, int]]) -> tuple[_Mark, ...]:
    """`marks` followed by a mark at each of the last KEPT `ends` (byte offset, element count), the last KEPT kept
    (the bytes up to the first of them hashed in one update)."""
    return (*marks, *_marked(marks[-1], body, ends[-KEPT:]))[-KEPT:]


def _last(
    body: bytes,
    array_open: int,
    close: int,
    marks: tuple[_Mark, ...],
    elements: list[Any],
    request: Any,
    head_members: _Head,
    rest: bytes | None = None,
    members: _Members | None = None,
) -> _Last:
    """What is kept of `body` (_Last). The head's digest is the first mark's fingerprint state (the same xxh3-128 of
    the same bytes), so it is never hashed again; `rest`: the digest of the bytes after the array when known."""
    base = marks[0].offset
    rest = rest if rest is not None else xxhash.xxh3_128_digest(memoryview(body)[close:])
    head = marks[0].digest.digest()
    return _Last(
        len(body),
        base,
        head,
        body[base:close],
        rest,
        array_open,
        close,
        marks,
        elements,
        request,
        members,
        head_members,
    )


def _rest_is(last: _Last, body: bytes, close: int) -> bool:
    """Whether `body`'s bytes from `close` on are the previous body's after its array's `]`."""
    return xxhash.xxh3_128_digest(memoryview(body)[close:]) == last.rest


def _locate(body: bytes, key: str, elements: list[Any], request: Any) -> _Last | None:
    """The marks of a body read whole, the members before its array a later read takes from its request, and the
    members after its array; None when its array cannot be found (the next body is read whole too)."""
    try:
        text = body.decode()
        located = json_spans.find_array(text, key)
    except (ValueError, UnicodeDecodeError):
        return None
    if len(located.ends) != len(elements):
        return None
    spans, names = _head(text, located, key)
    candidates = [(located.opened, 0), *((end, count + 1) for count, end in enumerate(located.ends))][-KEPT:]
    positions = [*spans, located.opened, *(position for position, _ in candidates), located.close]
    offsets = json_spans.byte_offsets(text, positions, 0)
    cuts, (array_open, *offsets, close_at) = offsets[: len(spans)], offsets[len(spans) :]
    first = _Mark(offsets[0], candidates[0][1], xxhash.xxh3_128(memoryview(body)[: offsets[0]]))
    later = [(offset, count) for offset, (_, count) in zip(offsets[1:], candidates[1:], strict=True)]
    members = _NO_MEMBERS.continued(
        body, close_at, 0, xxhash.xxh3_128(), json_spans.members_in_bytes(text, located.after, located.close, close_at)
    )
    head = _Head(tuple(names), array.array("q", cuts)) if names else _NO_HEAD
    return _last(body, array_open, close_at, _extend([first], body, later), elements, request, head, None, members)
