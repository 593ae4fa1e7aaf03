"""Text encoded with tiktoken where it gives exactly the Hugging Face tokenizer's ids; HF wherever that is not shown.

Tokenizing the appended messages with HF `tokenizers` was ~40% of tito's CPU per turn; tiktoken runs the same
byte-level BPE about five times faster. The encoder is built per tokenizer at load time only when every part of the
HF pipeline has a tiktoken equivalent, checked on the tokenizer's own JSON:
- the model is a byte-level BPE (no dropout, byte fallback, subword prefix or word suffix), its ranks are the vocab
  ids of the tokens' bytes, and its merges come in rank order of the tokens they make (tiktoken merges by rank);
- without `ignore_merges`, every vocab token is what the merges make of its own bytes (tiktoken looks a whole piece
  up before merging); both merge checks run once per vocabulary, remembered in tito's cache directory;
- the pre-tokenizer is one `Split` (isolated) by a pattern audited for tiktoken, then `ByteLevel` without its own
  regex or prefix space (tiktoken gets the pattern with its lookahead-free alternatives grouped: the same pieces,
  found faster, `grouped_pattern`); the normalizer is none or NFC (applied here with `unicodedata`, per piece
  between added tokens, as HF does);
- added tokens are matched on the raw text (not normalized, no strip or single-word rules), leftmost-longest;
  no truncation or padding.
Anything else falls back to HF, with the reason logged (`tito.fast_encoding`) and kept on the verdict.

The two regex engines (Oniguruma in `tokenizers`, fancy-regex in tiktoken) and Python's `unicodedata` know
different Unicode versions: the code points whose class (letter, mark, number, space, case fold) differs between
the engines, those unassigned in Python's tables and those normalized differently are found at build time, and a
text holding one goes to HF whole, as does a text with a lone surrogate (HF refuses it; tiktoken would replace it).
Equality beyond these checks (BPE on any piece) is shown by tests: the conformance matrix, the real-data replay and
a property test over random Unicode against HF (tests/test_fast_encoding.py).

Imports from tito: cache_dir, tokenizer_loading.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

import orjson
import tiktoken
import tokenizers
from tokenizers import Regex, normalizers, pre_tokenizers
from tokenizers import Tokenizer as BackendTokenizer

from tito.cache_dir import tito_cache_dir
from tito.tokenizer_loading import QWEN_PRE_TOKENIZER_PATTERNS, byte_to_unicode, without_added_tokens

__all__ = ["FastEncoder", "Verdict", "fast_encoder_for"]

_log = logging.getLogger("tito.fast_encoding")

DISABLE_VARIABLE = "TITO_FAST_ENCODER"
"""`TITO_FAST_ENCODER=0` keeps every tokenizer on HF (to compare, or to rule the fast encoder out)."""

_AUDITED_PATTERNS = frozenset(QWEN_PRE_TOKENIZER_PATTERNS)
"""Pre-tokenizer patterns whose constructs mean the same in Oniguruma and fancy-regex and that match every
character (tiktoken drops text its pattern does not match; HF keeps it as a piece): each ends in `\\s+` and has
`\\p{L}+`, `\\p{N}` and `[^\\s\\p{L}\\p{N}]+`-style alternatives without lookaround."""

_LOOKAHEAD_TAIL = r"|\s+(?!\S)|\s+"
"""How every audited pattern ends: its only alternative with a lookaround, then whitespace alone."""

_CLASSES = (r"\p{L}", r"\p{M}", r"\p{N}", r"\s", r"(?i:s|t|r|e|v|m|l|d)")
"""Every character class the audited patterns use (the case-folded letters of their contractions included)."""


_REMEMBERED_LENGTH = 16
"""Pieces between added tokens up to this many characters are remembered: a template writes the same few around
every message (`\n`, `user\n`, `assistant\n`), and a tiktoken call costs more than a lookup."""
_REMEMBERED_KEPT = 4096
"""At most this many remembered pieces (~1 MB)."""


@dataclass(frozen=True)
class Verdict:
    """Whether a tokenizer encodes through tiktoken, and why (or why not)."""

    encoder: FastEncoder | None
    reason: str


class FastEncoder:
    """A tokenizer's `encode(text, add_special_tokens=False)`, with and without its added tokens, through tiktoken."""

    def __init__(self, encoding: tiktoken.Encoding, backend: BackendTokenizer, nfc: bool, exceptions: str) -> None:
        self.encoding = encoding
        self._backend = backend
        self._plain = without_added_tokens(backend)
        self._nfc = nfc
        self._added = {token.content: token_id for token_id, token in backend.get_added_tokens_decoder().items()}
        by_length = sorted(self._added, key=len, reverse=True)
        # Longest first: at the leftmost match, the longest added token wins (HF's leftmost-longest matching).
        self._added_pattern = re.compile("|".join(map(re.escape, by_length))) if by_length else None
        self._exceptions = re.compile(f"[{exceptions}]") if exceptions else None
        self._remembered: dict[str, list[int]] = {}

    def encode(self, text: str) -> list[int]:
        """The ids HF gives for `text`: its added tokens split out, every piece between them as ordinary text."""
        if not self.takes_fast_path(text):
            return list(self._backend.encode_batch_fast([text], add_special_tokens=False)[0].ids)
        if self._added_pattern is None:
            return self._ordinary(text)
        ids: list[int] = []
        position = 0
        for match in self._added_pattern.finditer(text):
            if match.start() > position:
                ids += self._between(text[position : match.start()])
            ids.append(self._added[match.group()])
            position = match.end()
        if position < len(text):
            ids += self._between(text[position:])
        return ids

    def _between(self, text: str) -> list[int]:
        """The ids of a piece between added tokens; a short one remembered (the caller copies the list)."""
        if len(text) > _REMEMBERED_LENGTH:
            return self._ordinary(text)
        ids = self._remembered.get(text)
        if ids is None:
            ids = self._ordinary(text)
            if len(self._remembered) < _REMEMBERED_KEPT:
                self._remembered[text] = ids
        return ids

    def encode_ordinary(self, text: str) -> list[int]:
        """The ids of `text` as ordinary text: added-token strings in it are tokenized like any other text."""
        if not self.takes_fast_path(text):
            return list(self._plain.encode_batch_fast([text], add_special_tokens=False)[0].ids)
        return self._ordinary(text)

    def takes_fast_path(self, text: str) -> bool:
        """Whether tiktoken encodes `text` (else HF does: a lone surrogate, or a code point the engines differ on)."""
        if text.isascii():
            return True
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return self._exceptions is None or self._exceptions.search(text) is None

    def _ordinary(self, text: str) -> list[int]:
        if self._nfc and not text.isascii():
            text = unicodedata.normalize("NFC", text)
        return self.encoding.encode_ordinary(text)


_lock = threading.Lock()
_by_backend: dict[int, tuple[BackendTokenizer, Verdict]] = {}
_by_model: dict[str, tuple[tiktoken.Encoding | None, str]] = {}


def fast_encoder_for(backend: BackendTokenizer) -> Verdict:
    """The verdict for `backend`: built once per tokenizer object (its Encoding once per vocabulary), then reused."""
    with _lock:
        held = _by_backend.get(id(backend))
        if held is not None and held[0] is backend:
            return held[1]
        verdict = _decide(backend)
        _by_backend[id(backend)] = (backend, verdict)
    _log.info("%s", verdict.reason)
    return verdict


def _decide(backend: BackendTokenizer) -> Verdict:
    if os.environ.get(DISABLE_VARIABLE, "1") == "0":
        return Verdict(None, f"HF tokenizers: {DISABLE_VARIABLE}=0")
    if backend.encode_special_tokens:
        return Verdict(None, "HF tokenizers: the tokenizer encodes special-token text as text (split_special_tokens)")
    spec: dict[str, Any] = orjson.loads(backend.to_str())
    refusal = _refusal(spec)
    if refusal is not None:
        return Verdict(None, f"HF tokenizers: {refusal}")
    pattern: str = spec["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]
    model_key = hashlib.sha256(orjson.dumps([spec["model"], _normalizer(spec), pattern])).hexdigest()
    if model_key not in _by_model:
        _by_model[model_key] = _build_encoding(spec, backend, pattern, model_key)
    encoding, reason = _by_model[model_key]
    if encoding is None:
        return Verdict(None, f"HF tokenizers: {reason}")
    nfc = _normalizer(spec) is not None
    encoder = FastEncoder(encoding, backend, nfc, _exception_class())
    return Verdict(encoder, f"tiktoken {tiktoken.__version__} ({reason})")


def _refusal(spec: dict[str, Any]) -> str | None:
    """Why this tokenizer.json has a part tiktoken cannot express; None when every part has an equivalent."""
    model = spec["model"]
    if model.get("type") != "BPE":
        return f"the model is {model.get('type')}, not a BPE"
    for field, allowed in (
        ("dropout", (None, 0.0)),
        ("byte_fallback", (False, None)),
        ("continuing_subword_prefix", ("", None)),
        ("end_of_word_suffix", ("", None)),
    ):
        if model.get(field) not in allowed:
            return f"the BPE sets {field} = {model.get(field)!r}"
    if spec.get("truncation") is not None or spec.get("padding") is not None:
        return "the tokenizer truncates or pads"
    normalizer = _normalizer(spec)
    if normalizer is not None and normalizer != {"type": "NFC"}:
        return f"the normalizer {orjson.dumps(normalizer).decode()[:120]} is not NFC"
    pre = spec.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else [pre]
    if (
        len(steps) != 2
        or steps[0].get("type") != "Split"
        or steps[0].get("behavior") != "Isolated"
        or steps[0].get("invert")
        or "Regex" not in steps[0].get("pattern", {})
        or steps[1] != {**steps[1], "type": "ByteLevel", "add_prefix_space": False, "use_regex": False}
    ):
        return "the pre-tokenizer is not one isolated Split then ByteLevel (no regex, no prefix space)"
    if steps[0]["pattern"]["Regex"] not in _AUDITED_PATTERNS:
        return "the pre-tokenizer's pattern is not one audited to mean the same in tiktoken"
    for token in spec.get("added_tokens", []):
        if token["normalized"] or token["lstrip"] or token["rstrip"] or token["single_word"]:
            return f"added token {token['content']!r} is normalized, stripped or single-word"
    return None


def _normalizer(spec: dict[str, Any]) -> Any:
    """The tokenizer's normalizer; None for none at all or an empty sequence (DeepSeek's)."""
    normalizer = spec.get("normalizer")
    return None if normalizer == {"type": "Sequence", "normalizers": []} else normalizer


def _build_encoding(
    spec: dict[str, Any], backend: BackendTokenizer, pattern: str, model_key: str
) -> tuple[tiktoken.Encoding | None, str]:
    model = spec["model"]
    vocab: dict[str, int] = model["vocab"]
    to_byte = {ord(char): byte for byte, char in byte_to_unicode().items()}
    try:
        ranks = {token.translate(to_byte).encode("latin-1"): rank for token, rank in vocab.items()}
    except UnicodeEncodeError:
        return None, "the vocabulary is not byte-level"
    if any(bytes([byte]) not in ranks for byte in range(256)):
        return None, "the vocabulary lacks some of the 256 single bytes"
    if sorted(ranks.values()) != list(range(len(ranks))):
        return None, "the vocab ids are not 0..n-1"
    refusal = _merges_refusal(model, vocab, backend, model_key)
    if refusal is not None:
        return None, refusal
    encoding = tiktoken.Encoding(
        f"tito-{model_key[:12]}", pat_str=grouped_pattern(pattern), mergeable_ranks=ranks, special_tokens={}
    )
    return encoding, f"{len(ranks)} ranks, merges in rank order"


def grouped_pattern(pattern: str) -> str:
    """An audited pattern as tiktoken is given it: the alternatives before its lookahead in one group. A pattern with
    a lookaround runs in fancy-regex's backtracking VM, which hands each alternative without one to the regex crate
    as a search of its own; grouped, they are one search per piece, not one per alternative tried (a ~4 KB tool
    output: ~27% less time encoding it). The pieces are the same: an alternation takes its first alternative that
    matches, and the group's are tried in the same order before the rest."""
    if not pattern.endswith(_LOOKAHEAD_TAIL):
        return pattern
    return f"(?:{pattern[: -len(_LOOKAHEAD_TAIL)]}){_LOOKAHEAD_TAIL}"


def _merges_refusal(model: dict[str, Any], vocab: dict[str, int], backend: BackendTokenizer, key: str) -> str | None:
    """Why the merges are not tiktoken's rank-ordered BPE; None when they are. A vocabulary shown so is remembered
    in tito's cache directory (the check takes seconds, the vocabulary is the same every start)."""
    proof = tito_cache_dir() / "fast_encoding" / f"{key}.proven"
    if proof.is_file():
        return None
    last = -1
    for merge in model["merges"]:
        left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
        made = vocab.get(left + right)
        if made is None or made < last:
            return f"the merge {left!r} + {right!r} is not in rank order of the tokens merges make"
        last = made
    if not model.get("ignore_merges"):
        # tiktoken looks a whole piece up first; HF without ignore_merges only merges, so each token must be what the
        # merges make of its own bytes.
        tokens = list(vocab)
        made_of = BackendTokenizer(backend.model).encode_batch_fast(tokens, add_special_tokens=False)
        if any(encoding.ids != [vocab[token]] for token, encoding in zip(tokens, made_of, strict=True)):
            return "some vocab token is not what the merges make of its bytes (tiktoken would look it up whole)"
    proof.parent.mkdir(parents=True, exist_ok=True)
    proof.write_text("merges in rank order; without ignore_merges, every token made by its merges\n", encoding="utf-8")
    return None


@cache
def _exception_class() -> str:
    """A regex character class of the code points where HF and this encoder could disagree: those classed
    differently by Oniguruma and fancy-regex, those unassigned in Python's `unicodedata` (its NFC cannot know them)
    and those it normalizes unlike HF. Found once per set of library versions (seconds), then read from tito's cache
    directory."""
    versions = f"{tokenizers.__version__}-{tiktoken.__version__}-{unicodedata.unidata_version}"
    probes = hashlib.sha256(repr(_CLASSES).encode()).hexdigest()[:8]
    cached = tito_cache_dir() / "fast_encoding" / f"code-point-class-{versions}-{probes}.json"
    if cached.is_file():
        return str(orjson.loads(cached.read_bytes()))
    character_class = "".join(_ranges(_differing_code_points()))
    cached.parent.mkdir(parents=True, exist_ok=True)
    partial = cached.with_suffix(f".{os.getpid()}.tmp")
    partial.write_bytes(orjson.dumps(character_class))
    partial.replace(cached)
    return character_class


def _differing_code_points() -> list[int]:
    everything = "".join(chr(point) for point in range(0x110000) if not 0xD800 <= point < 0xE000)
    differ = {ord(char) for char in everything if unicodedata.category(char) == "Cn"}
    for pattern in _CLASSES:
        differ |= _members_hf(pattern, everything) ^ _members_tiktoken(pattern, everything)
    return sorted(differ | _normalized_differently(char for char in everything if ord(char) not in differ))


def _normalized_differently(chars: Iterable[str]) -> set[int]:
    """The code points whose decomposition, composition or combining class differ between HF's normalizers and
    `unicodedata` (their Unicode versions differ). Each is probed after a starter and around combining marks of
    classes 1 and 230, then each mark around one agreeing mark of every class: a class that differs reorders some
    pair in one and not in the other."""
    chars = list(chars)
    differ = _probed(chars, ["\u0334", "\u0301"])
    by_class: dict[int, str] = {}
    for char in chars:
        ccc = unicodedata.combining(char)
        if ccc and ccc not in by_class and ord(char) not in differ:
            by_class[ccc] = char
    return differ | _probed([char for char in chars if unicodedata.combining(char)], list(by_class.values()))


def _probed(chars: list[str], marks: list[str]) -> set[int]:
    differ: set[int] = set()
    probes = [(char, "".join(f"a{char}{mark}a{mark}{char}" for mark in marks)) for char in chars]
    forms: tuple[tuple[Literal["NFC", "NFD"], normalizers.Normalizer], ...] = (
        ("NFC", normalizers.NFC()),
        ("NFD", normalizers.NFD()),
    )
    for form, hf in forms:
        for start in range(0, len(probes), 1024):
            batch = probes[start : start + 1024]
            joined = "".join(probe for _, probe in batch)
            if hf.normalize_str(joined) == unicodedata.normalize(form, joined):
                continue
            differ.update(
                ord(char) for char, probe in batch if hf.normalize_str(probe) != unicodedata.normalize(form, probe)
            )
    return differ


def _members_hf(pattern: str, text: str) -> set[int]:
    split = pre_tokenizers.Split(Regex(pattern), behavior="removed")
    members: set[int] = set()
    for base in range(0, len(text), 4096):
        chunk = text[base : base + 4096]
        outside = bytearray(len(chunk))
        for _, (start, end) in split.pre_tokenize_str(chunk):
            outside[start:end] = b"\x01" * (end - start)
        members.update(ord(chunk[index]) for index, flag in enumerate(outside) if not flag)
    return members


def _members_tiktoken(pattern: str, text: str) -> set[int]:
    single_bytes = {bytes([byte]): byte for byte in range(256)}
    matcher = tiktoken.Encoding("tito-class", pat_str=pattern, mergeable_ranks=single_bytes, special_tokens={})
    return {ord(char) for char in matcher.decode(matcher.encode_ordinary(text))}


def _ranges(points: list[int]) -> Iterable[str]:
    start = previous = None
    for point in [*points, None]:
        if point is not None and previous is not None and point == previous + 1:
            previous = point
            continue
        if start is not None and previous is not None:
            yield re.escape(chr(start)) if start == previous else f"{re.escape(chr(start))}-{re.escape(chr(previous))}"
        start = previous = point
