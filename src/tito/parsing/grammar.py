"""The output-format grammar: what a format parser reads from marked text, and the base every format extends.

Marked text is the completion decoded with each marker id replaced by one sentinel character (see
markers.py), so a format parser matches plain regexes on one string.

Imports from tito: parsing.arguments, parsing.result.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from tito.parsing.arguments import ToolIndex, schema_mismatches
from tito.parsing.result import CallStatus

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
SENTINEL_FIRST = 0xFDD0
"""Marker k of a format is the character U+FDD0 + k: a Unicode noncharacter a model writing text never needs."""
SENTINEL_LAST = 0xFDEF
SENTINEL_RE = re.compile("[\ufdd0-\ufdef]")


@dataclass(frozen=True)
class Attempt:
    """A tool-call attempt as a format parser reports it; the pipeline restores text and assigns ids."""

    status: CallStatus
    raw: str
    name: str | None = None
    arguments: str | None = None
    detail: str = ""
    call_id: str | None = None


def unknown_tool(raw: str, name: str) -> Attempt:
    """The one wording of an attempt that names a tool the request did not send."""
    return Attempt(CallStatus.UNKNOWN_TOOL, raw, name=name, detail=f"{name!r} is not among the request's tools")


def json_call(raw: str, name: str, arguments: str, values: dict[str, object], tools: ToolIndex) -> Attempt:
    """A JSON-argument call: its text kept as written, its values checked against the schema as parameter
    formats check theirs, so the same call has the same status in every family."""
    mismatch = schema_mismatches(values, tools, name)
    status = CallStatus.SCHEMA_MISMATCH if mismatch else CallStatus.OK
    return Attempt(status, raw, name=name, arguments=arguments, detail=mismatch)


@dataclass(frozen=True)
class Body:
    """What a format parser reads from the text after the reasoning block."""

    content: str
    attempts: list[Attempt] = field(default_factory=list)


class OutputFormat(abc.ABC):
    """One completion format: its markers, whitespace conventions and tool-call grammar.

    Subclasses set `name`, `markers` (think markers first) and implement `parse_body`. The whitespace
    conventions invert the family's render, so a rendered message parses back to itself.
    """

    name: ClassVar[str]
    markers: ClassVar[tuple[str, ...]] = (THINK_OPEN, THINK_CLOSE)
    reasoning_strip: ClassVar[str | None] = "\n"
    """Characters stripped around reasoning (str.strip's argument; None = all whitespace, "" = none)."""
    content_strip: ClassVar[str | None] = None
    call_end_text: ClassVar[str] = ""
    """The plain text that closes a call where no marker does (`invoke>`): with the call markers, the only text
    after which a streaming parser re-reads the calls."""

    def __init__(self) -> None:
        if len(self.markers) > SENTINEL_LAST - SENTINEL_FIRST + 1:
            raise ValueError(f"format {self.name!r} has more markers than sentinels")
        self.sentinels: Mapping[str, str] = {m: chr(SENTINEL_FIRST + k) for k, m in enumerate(self.markers)}
        self.restore_pairs: tuple[tuple[str, str], ...] = tuple((s, m) for m, s in self.sentinels.items())
        self.call_sentinels: tuple[str, ...] = tuple(self.sentinels[m] for m in self.markers[2:])
        self.call_sentinel_set = frozenset(self.call_sentinels)

    @property
    def openers(self) -> tuple[str, ...]:
        """Marked-text spellings longer than one sentinel that open tool-call structure. A streaming parser
        holds back content that ends in a proper prefix of one (DSML's `<` + `｜DSML｜` + `tool_calls>`)."""
        return ()

    def mark(self, marker: str) -> str:
        """The sentinel that stands for `marker` in marked text."""
        return self.sentinels[marker]

    @abc.abstractmethod
    def parse_body(self, text: str, tools: ToolIndex) -> Body:
        """Content and tool-call attempts from the marked text after reasoning (stop token removed).

        A streaming parser calls this on every prefix of the body, so an attempt must be OK only once the
        text that decides it (its closing marker) is there: later text never changes an OK attempt.
        """

    def has_calls(self, text: str) -> bool:
        """Whether the body text holds any call marker; without one it is content only."""
        return any(sentinel in text for sentinel in self.call_sentinels)

    def may_decide(self, body: str, appended: int) -> bool:
        """Whether the last `appended` characters of `body` can change its calls: only a call marker or the
        text that closes a call can."""
        if not self.call_sentinel_set.isdisjoint(body[len(body) - appended :]):
            return True
        end = self.call_end_text
        return bool(end) and end in body[len(body) - appended - len(end) + 1 :]

    def parse(self, text: str, tools: ToolIndex) -> Body:
        """The body of a completion: content only without call markers, else the format's grammar."""
        return self.parse_body(text, tools) if self.has_calls(text) else self.content_only(text)

    def content_only(self, text: str) -> Body:
        return Body(text.strip(self.content_strip))

    def split_blocks(self, text: str, open_marker: str, close_marker: str) -> tuple[list[str], list[tuple[str, bool]]]:
        """Text outside `open ... close` blocks and each block's inner text with whether it closed.

        The first outside piece is the content before the first call; an open block without its close
        takes the rest of the text.
        """
        opener, closer = self.mark(open_marker), self.mark(close_marker)
        outside: list[str] = []
        blocks: list[tuple[str, bool]] = []
        position = 0
        while True:
            start = text.find(opener, position)
            if start < 0:
                outside.append(text[position:])
                return outside, blocks
            outside.append(text[position:start])
            end = text.find(closer, start + 1)
            if end < 0:
                blocks.append((text[start + 1 :], False))
                return outside, blocks
            blocks.append((text[start + 1 : end], True))
            position = end + 1

    def join_content(self, outside: list[str]) -> str:
        """Content before the calls, plus any non-blank text the model wrote between or after them."""
        first = outside[0].strip(self.content_strip)
        rest = [piece.strip() for piece in outside[1:] if piece.strip()]
        return "\n".join([first, *rest]) if rest else first

    def restore(self, text: str) -> str:
        """Marker text in place of sentinels that no structure consumed."""
        if text.isascii() or not SENTINEL_RE.search(text):
            return text
        for sentinel, marker in self.restore_pairs:
            if sentinel in text:
                text = text.replace(sentinel, marker)
        return text
