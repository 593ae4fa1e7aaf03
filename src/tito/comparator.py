"""Compare incremental ids with a canonical render's ids and say, typed, how they differ.

Both sequences are cut into segments at special tokens. A different number of segments is a
special-token structure mismatch; a different special token at the same place is a type mismatch;
different ids between special tokens are text mismatches, split by whether the text belongs to an
assistant turn (sampled text: expected to differ when a model's spelling is not canonical) or not
(always a bug). Each report decodes the context around the first differing token.

Imports from tito: tokenizer_protocol.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tito.tokenizer_protocol import Tokenizer


class MismatchType(enum.Enum):
    SPECIAL_TOKEN_STRUCTURE = "special_token_structure"
    SPECIAL_TOKEN_TYPE = "special_token_type"
    NON_ASSISTANT_TEXT = "non_assistant_text"
    ASSISTANT_TEXT = "assistant_text"


@dataclass(frozen=True)
class Mismatch:
    type: MismatchType
    position: int
    """Index of the first differing token in the expected sequence."""
    expected: str
    actual: str

    def __str__(self) -> str:
        return f"{self.type.value} at token {self.position}: expected {self.expected!r}, got {self.actual!r}"


@dataclass(frozen=True)
class _Segment:
    start: int
    special_id: int | None
    text_ids: tuple[int, ...]
    is_assistant: bool


_NON_ASSISTANT_ROLES = ("user", "system", "tool", "observation")


def _segments(ids: Sequence[int], special_ids: frozenset[int], tokenizer: Tokenizer) -> list[_Segment]:
    segments: list[_Segment] = []
    start, special, is_assistant = 0, None, False
    text: list[int] = []
    for position, token in enumerate([*ids, None]):  # None flushes the last segment
        if token is None or token in special_ids:
            if position > start or special is not None:
                head = tokenizer.decode(([special] if special is not None else []) + text[:3]).lower()
                if "assistant" in head:
                    is_assistant = True
                elif any(role in head for role in _NON_ASSISTANT_ROLES):
                    is_assistant = False
                segments.append(_Segment(start, special, tuple(text), is_assistant))
            start, special, text = position, token, []
        else:
            text.append(token)
    return segments


def _first_difference(a: Sequence[int], b: Sequence[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def compare_token_sequences(
    expected: Sequence[int],
    actual: Sequence[int],
    tokenizer: Tokenizer,
    special_tokens: Iterable[str],
) -> list[Mismatch]:
    """Typed differences between `expected` (canonical) and `actual` (incremental) ids; empty when equal."""
    if list(expected) == list(actual):
        return []
    special_ids = frozenset(
        ids[0] for token in special_tokens if len(ids := tokenizer.encode(token, add_special_tokens=False)) == 1
    )

    def show(ids: Sequence[int], at: int) -> str:
        return tokenizer.decode(list(ids[max(0, at - 8) : at + 8]))

    ours, theirs = _segments(expected, special_ids, tokenizer), _segments(actual, special_ids, tokenizer)
    if [s.special_id is None for s in ours] != [s.special_id is None for s in theirs] or len(ours) != len(theirs):
        at = _first_difference(expected, actual)
        return [Mismatch(MismatchType.SPECIAL_TOKEN_STRUCTURE, at, show(expected, at), show(actual, at))]
    mismatches: list[Mismatch] = []
    for a, b in zip(ours, theirs, strict=True):
        if a.special_id != b.special_id:
            mismatches.append(
                Mismatch(MismatchType.SPECIAL_TOKEN_TYPE, a.start, show(expected, a.start), show(actual, b.start))
            )
        elif a.text_ids != b.text_ids:
            offset = 1 if a.special_id is not None else 0
            at = a.start + offset + _first_difference(a.text_ids, b.text_ids)
            kind = MismatchType.ASSISTANT_TEXT if a.is_assistant else MismatchType.NON_ASSISTANT_TEXT
            mismatches.append(Mismatch(kind, at, show(expected, at), show(actual, b.start + (at - a.start))))
    return mismatches
