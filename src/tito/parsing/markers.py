"""Marker scanning: sampled ids -> marked text, whole or as the ids arrive.

Boundaries are found by token id. For a tokenizer, a marker that encodes to one id is *atomic*, and only
that id counts as the marker: a literal `<tool_call>` the model spelled with ordinary text tokens decodes
as text and stays content. Each marker id becomes its format's sentinel character. The completion is
decoded once when every occurrence of a marker's text comes from a marker id (the usual case), else run
by run between marker ids. A marker the tokenizer does not keep atomic falls back to text: its spelling is
replaced by the sentinel. Stop tokens end the completion the same way (by id, or by text when not atomic).

`MarkedTextStream` produces the same text from ids fed in chunks, releasing only text no later id can
change: no incomplete UTF-8 character, no possible prefix of a text marker or stop text.

Imports from tito: parsing.grammar, tokenizer_protocol (the Tokenizer protocol).
"""

from __future__ import annotations

import re
import sys
from array import array
from collections.abc import Callable, Mapping, Sequence

from tito.parsing.grammar import SENTINEL_FIRST, SENTINEL_RE, THINK_CLOSE, THINK_OPEN, OutputFormat
from tito.tokenizer_protocol import Tokenizer

_SCAN_LIMIT = 4096
"""Up to this many ids, set intersection + list.index find markers fastest; beyond, bytes.find over packed ids."""
_REPLACEMENT = "\ufffd"
_MAX_CHARACTER_TOKENS = 3
"""An incomplete UTF-8 character spans at most 3 bytes, so at most 3 trailing tokens."""
_TOKEN_TEXTS_KEPT = 1 << 15
"""Single ids whose text a scanner remembers (the first ones seen): more distinct ids than most runs' completions
hold, ~5 MB at most."""
_JOINED_LIMIT = 512
"""Runs up to this many ids are joined from remembered texts (byte-level decoders); longer ones decode in one call."""


def _pack(ids: list[int]) -> bytes:
    """Ids as big-endian 32-bit integers: the low byte last, so bytes.find's last-byte skip rarely stalls
    (little-endian ids of a 150k vocabulary all end in 0x00 or 0x01)."""
    packed = array("i", ids)
    if sys.byteorder == "little":
        packed.byteswap()
    return packed.tobytes()


def _find_aligned(packed: bytes, needle: bytes, start: int) -> int:
    """The index of the first whole 32-bit id equal to `needle` in packed[start:], or -1."""
    found = packed.find(needle, start)
    while found >= 0 and found % 4:
        found = packed.find(needle, found + 1)
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


def eos_tokens(tokenizer: Tokenizer) -> list[str]:
    """The tokenizer's own end-of-sequence token(s): the stop tokens of a family that declares none."""
    found: list[str] = []
    eos = getattr(tokenizer, "eos_token", None)
    if isinstance(eos, str):
        found.append(eos)
    special_map = getattr(tokenizer, "special_tokens_map", None)
    if isinstance(special_map, Mapping) and isinstance(special_map.get("eos_token"), str):
        found.append(special_map["eos_token"])
    return found


def held_prefix_length(text: str, spellings: Sequence[str]) -> int:
    """The length of the longest suffix of `text` that is a proper prefix of one of `spellings`."""
    longest = 0
    for spelling in spellings:
        for size in range(min(len(spelling) - 1, len(text)), longest, -1):
            if text.endswith(spelling[:size]):
                longest = size
                break
    return longest


def neutralized(text: str) -> str:
    """Decoded text with each noncharacter a model wrote replaced: only marker ids become sentinels."""
    if not text.isascii() and SENTINEL_RE.search(text):
        return SENTINEL_RE.sub(_REPLACEMENT, text)
    return text


class MarkerScanner:
    """One format's markers and stop tokens resolved to ids for one tokenizer, once."""

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
        self.marker_needles = [(marker_id, _pack([marker_id])) for marker_id in self.marker_ids]
        self.marker_texts = {
            marker_id: output_format.markers[ord(sentinel) - SENTINEL_FIRST]
            for marker_id, sentinel in self.marker_ids.items()
        }
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
        self.held_spellings = tuple(marker for marker, _ in self.text_markers) + tuple(self.stop_texts)
        """Texts a run's tail may be the start of: held back while streaming until decided."""
        self._token_texts: dict[int, str] = {}
        self._joins_token_texts = getattr(tokenizer, "byte_level_decode", False) is True
        """`decode(ids)` is the join of each id's decode when none holds a replaced byte (`run_text`)."""
        self.think_open_id = _atomic_id(tokenizer, THINK_OPEN) if THINK_OPEN in output_format.markers else None
        self.think_close_id = _atomic_id(tokenizer, THINK_CLOSE) if THINK_CLOSE in output_format.markers else None

    def _stop_position(self, ids: list[int]) -> int | None:
        """Where the first stop id is, if any (engines stop there; anything after it is not the turn's)."""
        stop_ids = self.stop_ids
        if len(stop_ids) > 1 and ids and ids[-1] in stop_ids and stop_ids.isdisjoint(ids[:-1]):
            return len(ids) - 1  # the usual end, checked for every stop id in one pass rather than one pass each
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

    def clean(self, text: str) -> str:
        """Decoded text with noncharacters neutralised and non-atomic markers turned into sentinels."""
        return self.mark_text_markers(neutralized(text))

    def mark_text_markers(self, text: str) -> str:
        """Each spelling of a marker the tokenizer does not keep atomic replaced by its sentinel."""
        for marker, sentinel in self.text_markers:
            if marker in text:
                text = text.replace(marker, sentinel)
        return text

    def cut_at_stop_text(self, text: str) -> tuple[str, bool]:
        """`text` up to the earliest stop token written as text (a stop the tokenizer keeps no id for)."""
        cuts = [cut for cut in (text.find(stop) for stop in self.stop_texts) if cut >= 0]
        return (text[: min(cuts)], True) if cuts else (text, False)

    def marked_text(self, ids: list[int]) -> tuple[str, bool]:
        """The completion up to its first stop as text, each atomic marker id replaced by its sentinel;
        and whether a stop ended it.

        Fast path: decode once and replace each marker's text, valid when the text holds exactly as many
        occurrences of each marker as there are marker ids (no marker spelled with ordinary tokens).
        Otherwise decode run by run between marker ids, so a spelled marker stays text.
        """
        stop_at = self._stop_position(ids)
        body = ids if stop_at is None else ids[:stop_at]
        text = self._marked_fast(body)
        if text is None:
            text = self._marked_by_runs(body)
        if self.stop_texts:
            text, stopped_by_text = self.cut_at_stop_text(text)
            return text, stopped_by_text or stop_at is not None
        return text, stop_at is not None

    def _marked_fast(self, body: list[int]) -> str | None:
        text = self.run_text(body)
        # One C pass keeping the marker ids alone (counting every id costs twice as much; list.count, a pass each),
        # then counted in that short list (a Counter's Python steps cost more than the counts).
        marker_ids = list(filter(self.marker_id_set.__contains__, body))
        present: list[int] = []
        for marker_id, occurrences in self.marker_counters.items():
            found = occurrences(text)
            if found != marker_ids.count(marker_id):
                return None
            if found:
                present.append(marker_id)
        text = self.clean(text)
        for marker_id in present:
            text = text.replace(self.marker_texts[marker_id], self.marker_ids[marker_id])
        return text

    def _marked_by_runs(self, body: list[int]) -> str:
        pieces: list[str] = []
        previous = 0
        for position, marker_id in self._positions(body):
            if position > previous:
                pieces.append(self.clean(self.tokenizer.decode(body[previous:position], skip_special_tokens=False)))
            pieces.append(self.marker_ids[marker_id])
            previous = position + 1
        if previous < len(body):
            pieces.append(self.clean(self.tokenizer.decode(body[previous:], skip_special_tokens=False)))
        return "".join(pieces)

    def token_text(self, token: int) -> str:
        """`decode([token])`, remembered: a stream decodes nearly every id alone (engines send one per chunk), and
        a decode call costs more than the text it makes (~1.5 us hot, ~20 us cold in a server's turn)."""
        text = self._token_texts.get(token)
        if text is None:
            text = self.tokenizer.decode([token], skip_special_tokens=False)
            if len(self._token_texts) < _TOKEN_TEXTS_KEPT:
                self._token_texts[token] = text
        return text

    def run_text(self, run: list[int]) -> str:
        """`decode(run)`; a run of one id (a stream's usual run) through `token_text`. With a byte-level decoder, a
        short run is the join of its ids' texts when each is whole characters (no replacement character): the
        decode of bytes that are each valid UTF-8 is their texts one after another. In a server's turn, a decode call
        cost ~50 us, its tables out of cache; the join a few."""
        if len(run) == 1:
            return self.token_text(run[0])
        if self._joins_token_texts and len(run) <= _JOINED_LIMIT:
            texts = self._token_texts
            try:  # every id remembered (the usual case): one C-level join, no Python step per id
                joined = "".join(map(texts.__getitem__, run))
            except KeyError:  # new ids remembered while the table holds the whole run; else one decode call for it
                room = len(texts) + len(run) <= _TOKEN_TEXTS_KEPT
                joined = "".join(map(self.token_text, run)) if room else _REPLACEMENT
            if _REPLACEMENT not in joined:
                return joined
        return self.tokenizer.decode(run, skip_special_tokens=False)

    def _is_blank(self, token: int) -> bool:
        return not self.token_text(token).strip()

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


class MarkedTextStream:
    """`MarkerScanner.marked_text` for ids that arrive in chunks: each `feed` returns the marked text it
    decided, and the pieces add up to the whole completion's marked text."""

    def __init__(self, scanner: MarkerScanner) -> None:
        self.scanner = scanner
        self.special = scanner.stop_ids | scanner.marker_id_set
        self.stopped = False
        self._run: list[int] = []
        """Ids of the current text run not yet decoded (an incomplete character at its end)."""
        self._held = ""
        """Text of the current run held back (neutralised, text markers marked): a possible prefix of a text
        marker or stop text."""

    def feed(self, ids: Sequence[int]) -> str:
        if self.stopped:
            return ""
        if self.special.isdisjoint(ids):
            if len(ids) == 1 and not self._run and not self._held and not self.scanner.held_spellings:
                # An engine's usual chunk, one id, in `_release`'s usual case, without its steps: a text no later
                # id can change (a complete character, no text marker or stop text to wait for) leaves at once.
                text = self.scanner.token_text(ids[0])
                if not text.endswith(_REPLACEMENT):
                    return neutralized(text)
            self._run.extend(ids)
            return self._release(final=False)
        pieces: list[str] = []
        for token in ids:
            if token in self.scanner.stop_ids:
                pieces.append(self._release(final=True))
                self.stopped = True
                return "".join(pieces)
            sentinel = self.scanner.marker_ids.get(token)
            if sentinel is None:
                self._run.append(token)
                continue
            pieces.append(self._release(final=True))
            if self.stopped:  # a stop text ended the run
                return "".join(pieces)
            pieces.append(sentinel)
        pieces.append(self._release(final=False))
        return "".join(pieces)

    def finish(self) -> str:
        """The rest of the text once no id follows."""
        return "" if self.stopped else self._release(final=True)

    def _release(self, final: bool) -> str:
        decode = self.scanner.tokenizer.decode
        run = self._run
        if run:
            text = self.scanner.run_text(run)
            if final or not text.endswith(_REPLACEMENT):
                self._held += neutralized(text)
                run.clear()
            else:  # keep the tokens of an incomplete character until it completes
                for keep in range(1, min(_MAX_CHARACTER_TOKENS, len(run) - 1) + 1):
                    text = decode(run[:-keep], skip_special_tokens=False)
                    if not text.endswith(_REPLACEMENT):
                        self._held += neutralized(text)
                        del run[:-keep]
                        break
        held = self._held
        if not held or not self.scanner.held_spellings:
            self._held = ""
            return held
        held = self.scanner.mark_text_markers(held)
        if self.scanner.stop_texts:
            held, self.stopped = self.scanner.cut_at_stop_text(held)
        hold = 0 if final or self.stopped else held_prefix_length(held, self.scanner.held_spellings)
        released, self._held = held[: len(held) - hold], held[len(held) - hold :]
        return released
