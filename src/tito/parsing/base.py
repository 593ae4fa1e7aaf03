"""The shared parse pipeline: special-token ids -> marked text -> reasoning, content and tool-call attempts.

Boundaries are found by token id. Each format names its markers (`<think>`, `<tool_call>`, ...); for
a tokenizer, a marker that encodes to one id is *atomic*, and only that id counts as the marker: a
literal `<tool_call>` the model spelled with ordinary text tokens decodes as text and stays content.
Each marker id becomes one sentinel character (a Unicode noncharacter, U+FDD0 + k, which a model
writing text never needs), so format parsers match plain regexes on one string. The completion is
decoded once when every occurrence of a marker's text comes from a marker id (the usual case), else
run by run between marker ids. A marker the tokenizer does not keep atomic falls back to text: its
spelling is replaced by the sentinel. Sentinels left where no structure expects them are turned back
into the marker's text in every output string.

Imports from tito: parsing.arguments, parsing.result, families.base (Family), tokenizer_loading (Tokenizer).
"""

from __future__ import annotations

import abc
import os
import re
import sys
from array import array
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from tito.families.base import Family
from tito.parsing.arguments import ToolIndex
from tito.parsing.result import AssistantMessage, CallStatus, FinishReason, ParseResult, ToolCallAttempt, ToolSchema
from tito.tokenizer_loading import Tokenizer

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
_SENTINEL_FIRST = 0xFDD0
_SENTINEL_LAST = 0xFDEF
_SENTINEL_RE = re.compile("[\ufdd0-\ufdef]")
_SCAN_LIMIT = 4096
"""Up to this many ids, set intersection + list.index find markers fastest; beyond, bytes.find over packed ids."""


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

    def __init__(self) -> None:
        if len(self.markers) > _SENTINEL_LAST - _SENTINEL_FIRST + 1:
            raise ValueError(f"format {self.name!r} has more markers than sentinels")
        self.sentinels: Mapping[str, str] = {m: chr(_SENTINEL_FIRST + k) for k, m in enumerate(self.markers)}
        self.restore_pairs: tuple[tuple[str, str], ...] = tuple((s, m) for m, s in self.sentinels.items())

    def mark(self, marker: str) -> str:
        """The sentinel that stands for `marker` in marked text."""
        return self.sentinels[marker]

    @abc.abstractmethod
    def parse_body(self, text: str, tools: ToolIndex) -> Body:
        """Content and tool-call attempts from the marked text after reasoning (stop token removed)."""

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
        if text.isascii() or not _SENTINEL_RE.search(text):
            return text
        for sentinel, marker in self.restore_pairs:
            if sentinel in text:
                text = text.replace(sentinel, marker)
        return text


def _pack(ids: list[int]) -> bytes:
    """Ids as big-endian 32-bit integers: the low byte last, so bytes.find's last-byte skip rarely stalls
    (little-endian ids of a 150k vocabulary all end in 0x00 or 0x01)."""
    packed = array("i", ids)
    if sys.byteorder == "little":
        packed.byteswap()
    return packed.tobytes()


def _packed(token_id: int) -> bytes:
    return _pack([token_id])


def _find_aligned(packed: bytes, needle: bytes, start: int, end: int | None = None) -> int:
    """The index of the first whole 32-bit id equal to `needle` in packed[start:end], or -1."""
    end = len(packed) if end is None else end
    found = packed.find(needle, start, end)
    while found >= 0 and found % 4:
        found = packed.find(needle, found + 1, end)
    return found // 4 if found >= 0 else -1


def _occurrence_counter(marker: str) -> Callable[[str], int]:
    """Counts every occurrence of `marker`, overlapping ones too when the marker can overlap itself
    (`｜DSML｜`): an extra, overlapping spelled copy must not pass for a real one."""
    overlaps = tuple(marker + marker[k:] for k in range(1, len(marker)) if marker[:k] == marker[-k:])
    if not overlaps:
        return lambda text: text.count(marker)
    pattern = re.compile(f"(?={re.escape(marker)})")

    def count(text: str) -> int:
        if any(overlap in text for overlap in overlaps):
            return sum(1 for _ in pattern.finditer(text))
        return text.count(marker)

    return count


def _atomic_id(tokenizer: Tokenizer, marker: str) -> int | None:
    """The marker's single id when the tokenizer keeps it atomic, else None (text fallback)."""
    ids = tokenizer.encode(marker, add_special_tokens=False)
    if len(ids) == 1 and tokenizer.decode(ids, skip_special_tokens=False) == marker:
        return int(ids[0])
    return None


def _eos_tokens(tokenizer: Tokenizer) -> list[str]:
    found: list[str] = []
    eos = getattr(tokenizer, "eos_token", None)
    if isinstance(eos, str):
        found.append(eos)
    special_map = getattr(tokenizer, "special_tokens_map", None)
    if isinstance(special_map, Mapping) and isinstance(special_map.get("eos_token"), str):
        found.append(special_map["eos_token"])
    return found


class CompletionParser:
    """One format bound to one tokenizer: marker and stop ids resolved once, then `parse` per turn."""

    def __init__(self, output_format: OutputFormat, tokenizer: Tokenizer, stop_tokens: Sequence[str]) -> None:
        self.format = output_format
        self.tokenizer = tokenizer
        self.marker_ids: dict[int, str] = {}
        self.text_markers: list[tuple[str, str]] = []
        for marker, sentinel in output_format.sentinels.items():
            marker_id = _atomic_id(tokenizer, marker)
            if marker_id is None:
                self.text_markers.append((marker, sentinel))
            else:
                self.marker_ids[marker_id] = sentinel
        self.marker_needles = [(marker_id, _packed(marker_id)) for marker_id in self.marker_ids]
        self.marker_texts = {marker_id: self._marker_of(sentinel) for marker_id, sentinel in self.marker_ids.items()}
        self.marker_counters = {marker_id: _occurrence_counter(text) for marker_id, text in self.marker_texts.items()}
        stop_ids: set[int] = set()
        self.stop_texts: list[str] = []
        for stop in dict.fromkeys(stop_tokens):
            stop_id = _atomic_id(tokenizer, stop)
            if stop_id is None:
                self.stop_texts.append(stop)
            else:
                stop_ids.add(stop_id)
        self.stop_ids = frozenset(stop_ids)
        self.marker_id_set = frozenset(self.marker_ids)
        self._blank_ids: dict[int, bool] = {}
        self.think_open_id = _atomic_id(tokenizer, THINK_OPEN) if THINK_OPEN in output_format.markers else None
        self.think_close_id = _atomic_id(tokenizer, THINK_CLOSE) if THINK_CLOSE in output_format.markers else None

    def _marker_of(self, sentinel: str) -> str:
        return self.format.markers[ord(sentinel) - _SENTINEL_FIRST]

    # ---- token level ----

    def _stop_position(self, ids: list[int]) -> int | None:
        """Where the first stop id is, if any (engines stop there; anything after it is not the turn's)."""
        first: int | None = None
        for stop_id in self.stop_ids:
            try:
                first = ids.index(stop_id, 0, len(ids) if first is None else first)
            except ValueError:
                continue
        return first

    def _positions(self, ids: list[int]) -> list[tuple[int, int]]:
        """Every marker id's position, in order."""
        if len(ids) <= _SCAN_LIMIT:  # a set intersection, then list.index for the few ids present
            hits: list[tuple[int, int]] = []
            for token in self.marker_id_set.intersection(ids):
                found = ids.index(token)
                while True:
                    hits.append((found, token))
                    try:
                        found = ids.index(token, found + 1)
                    except ValueError:
                        break
            hits.sort()
            return hits
        # Long completions: one C-speed bytes.find pass per marker id over the packed ids.
        packed = _pack(ids)
        positions: list[tuple[int, int]] = []
        for marker_id, needle in self.marker_needles:
            found = _find_aligned(packed, needle, 0)
            while found >= 0:
                positions.append((found, marker_id))
                found = _find_aligned(packed, needle, (found + 1) * 4)
        positions.sort()
        return positions

    def _clean(self, text: str) -> str:
        """Decoded text with noncharacters neutralised and non-atomic markers turned into sentinels."""
        if not text.isascii() and _SENTINEL_RE.search(text):  # a model-written noncharacter is not a marker
            text = _SENTINEL_RE.sub("\ufffd", text)
        for marker, sentinel in self.text_markers:
            if marker in text:
                text = text.replace(marker, sentinel)
        return text

    def marked_text(self, ids: list[int]) -> tuple[str, bool]:
        """The completion up to its first stop id as text, each atomic marker id replaced by its sentinel;
        and whether a stop id ended it.

        Fast path: decode once and replace each marker's text, valid when the text holds exactly as many
        occurrences of each marker as there are marker ids (no marker spelled with ordinary tokens).
        Otherwise decode run by run between marker ids, so a spelled marker stays text.
        """
        stop_at = self._stop_position(ids)
        body = ids if stop_at is None else ids[:stop_at]
        text = self.tokenizer.decode(body, skip_special_tokens=False)
        id_counts = Counter(body)  # one C pass; list.count per marker would be one pass each
        present: list[int] = []
        for marker_id, occurrences in self.marker_counters.items():
            found = occurrences(text)
            if found != id_counts.get(marker_id, 0):
                return self._marked_by_runs(body), stop_at is not None
            if found:
                present.append(marker_id)
        text = self._clean(text)
        for marker_id in present:
            text = text.replace(self.marker_texts[marker_id], self.marker_ids[marker_id])
        return text, stop_at is not None

    def _marked_by_runs(self, body: list[int]) -> str:
        pieces: list[str] = []
        previous = 0
        for position, marker_id in self._positions(body):
            if position > previous:
                pieces.append(self._clean(self.tokenizer.decode(body[previous:position], skip_special_tokens=False)))
            pieces.append(self.marker_ids[marker_id])
            previous = position + 1
        if previous < len(body):
            pieces.append(self._clean(self.tokenizer.decode(body[previous:], skip_special_tokens=False)))
        return "".join(pieces)

    def _is_blank(self, token: int) -> bool:
        blank = self._blank_ids.get(token)
        if blank is None:
            blank = self._blank_ids[token] = not self.tokenizer.decode([token], skip_special_tokens=False).strip()
        return blank

    def prompt_opens_reasoning(self, prompt_ids: Sequence[int]) -> bool:
        """Whether the generation prompt ends inside a reasoning block (`...<think>` or `...<think>\\n`)."""
        tail = list(prompt_ids[-4:])
        if self.think_open_id is not None and self.think_close_id is not None:
            for token in reversed(tail):
                if token == self.think_open_id:
                    return True
                if token == self.think_close_id or not self._is_blank(token):
                    return False
            return False
        text = self.tokenizer.decode(list(prompt_ids[-8:]), skip_special_tokens=False).rstrip()
        return text.endswith(THINK_OPEN)

    # ---- text level ----

    def parse(
        self,
        completion_ids: Sequence[int],
        prompt_ids: Sequence[int] | None = None,
        tools: Sequence[ToolSchema] | None = None,
    ) -> ParseResult:
        text, stopped = self.marked_text(list(completion_ids))
        if not stopped:
            for stop in self.stop_texts:
                cut = text.find(stop)
                if cut >= 0:
                    text, stopped = text[:cut], True
                    break
        fmt = self.format
        reasoning: str | None = None
        closed: bool | None = None
        has_think = THINK_OPEN in fmt.sentinels
        if has_think:
            opener, closer = fmt.mark(THINK_OPEN), fmt.mark(THINK_CLOSE)
            opened = prompt_ids is not None and self.prompt_opens_reasoning(prompt_ids)
            lead = text.lstrip()
            if lead.startswith(opener):
                opened, text = True, lead[1:]
            elif prompt_ids is None and closer in text:
                opened = True  # no prompt to tell: a closing marker means the prompt opened the block
            if opened:
                end = text.find(closer)
                if end < 0:
                    reasoning, text, closed = text, "", False
                else:
                    reasoning, text, closed = text[:end], text[end + 1 :], True
        if closed is False:
            body = Body("")
        elif not self._any_call_marker(text):
            body = fmt.content_only(text)
        else:
            body = fmt.parse_body(text, ToolIndex.of(list(tools) if tools is not None else None))
        return self._result(body, reasoning, closed, stopped)

    def _any_call_marker(self, text: str) -> bool:
        return any(self.format.mark(m) in text for m in self.format.markers[2:])

    def _result(self, body: Body, reasoning: str | None, closed: bool | None, stopped: bool) -> ParseResult:
        fmt = self.format
        message: AssistantMessage = {"role": "assistant", "content": fmt.restore(body.content)}
        if reasoning is not None:
            message["reasoning_content"] = fmt.restore(reasoning.strip(fmt.reasoning_strip))
        attempts: list[ToolCallAttempt] = []
        calls: list[dict[str, Any]] = []
        for index, attempt in enumerate(body.attempts):
            name = None if attempt.name is None else fmt.restore(attempt.name)
            arguments = None if attempt.arguments is None else fmt.restore(attempt.arguments)
            call_id = attempt.call_id
            if attempt.status is CallStatus.OK:
                call_id = call_id or f"call_{os.urandom(12).hex()}"
                calls.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}})
            raw = fmt.restore(attempt.raw)
            attempts.append(ToolCallAttempt(index, attempt.status, name, arguments, raw, attempt.detail, call_id))
        if calls:
            message["tool_calls"] = calls
        finish: FinishReason = ("tool_calls" if calls else "stop") if stopped else "length"
        return ParseResult(message, finish, tuple(attempts), closed)


_CACHE_SIZE = 32
_PARSERS: OrderedDict[tuple[int, str, tuple[str, ...]], CompletionParser] = OrderedDict()
"""Recently used parsers. Bounded, because a parser holds its tokenizer: a long-lived caller (TitoTokenizer)
keeps its own parser, and this cache only spares `parse_completion` callers the id resolution."""


def parser_for(output_format: OutputFormat, family: Family, tokenizer: Tokenizer) -> CompletionParser:
    """The parser of `family`'s format for `tokenizer`, its ids resolved once and then reused."""
    stops = tuple(family.stop_tokens) if family.stop_tokens else tuple(_eos_tokens(tokenizer))
    key = (id(tokenizer), output_format.name, stops)
    parser = _PARSERS.get(key)
    if parser is not None and parser.tokenizer is tokenizer and parser.format is output_format:
        _PARSERS.move_to_end(key)
        return parser
    parser = _PARSERS[key] = CompletionParser(output_format, tokenizer, stops)
    while len(_PARSERS) > _CACHE_SIZE:
        _PARSERS.popitem(last=False)
    return parser
