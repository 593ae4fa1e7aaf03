"""tiktoken gives exactly the HF tokenizer's ids wherever tito encodes through it, and HF keeps the rest.

The conformance matrix (tests/test_conformance.py) and the real-data replay run through the fast encoder for every
family on a Qwen vocabulary (stand-ins included); here: the decision per tokenizer, a property test over random
Unicode against HF for every reference tokenizer the fast encoder takes, and every code point in context.
"""

from __future__ import annotations

import json
import unicodedata
from functools import cache
from typing import Any

import pytest
import tiktoken
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer as BackendTokenizer

from tests.conftest import family_tito, reference_path
from tito.fast_encoding import DISABLE_VARIABLE, FastEncoder, Verdict, fast_encoder_for, grouped_pattern
from tito.tokenizer_loading import QWEN_PRE_TOKENIZER_PATTERNS, byte_to_unicode, without_added_tokens

FAST = ["qwen3", "qwen3-thinking-2507", "qwen3.5", "qwen3.6"]
"""The reference tokenizers tiktoken can express (their tokenizer.json: NFC, one Split, byte-level BPE)."""


@cache
def reference(name: str) -> BackendTokenizer:
    return BackendTokenizer.from_file(str(reference_path("tokenizers", name, "tokenizer.json")))


def fast(name: str) -> FastEncoder:
    verdict = fast_encoder_for(reference(name))
    assert verdict.encoder is not None, verdict.reason
    return verdict.encoder


def hf_ids(backend: BackendTokenizer, text: str) -> list[int]:
    return list(backend.encode(text, add_special_tokens=False).ids)


@pytest.mark.parametrize("name", FAST)
def test_qwen_reference_tokenizers_encode_through_tiktoken(name: str) -> None:
    assert "tiktoken" in fast_encoder_for(reference(name)).reason


def test_deepseek_v4_stays_on_hf_and_says_why() -> None:
    """Three Splits in a row (digits, CJK, the rest) are no single tiktoken pattern."""
    verdict = fast_encoder_for(reference("deepseek-v4"))
    assert verdict.encoder is None
    assert "pre-tokenizer is not one isolated Split then ByteLevel" in verdict.reason


def test_a_family_tito_encodes_through_tiktoken() -> None:
    """The library's hot path (ContentTokenizer) takes the encoder for the real Qwen tokenizer and for stand-ins."""
    for family in ("qwen3", "qwen35", "glm47"):
        assert family_tito(family).encoder_reason.startswith("tiktoken"), family
    assert family_tito("deepseekv4").encoder_reason.startswith("HF tokenizers: the pre-tokenizer")


def special_tokens(name: str) -> list[str]:
    return [token.content for token in reference(name).get_added_tokens_decoder().values()]


PIECES = st.one_of(
    st.text(max_size=12),
    st.text(st.characters(codec="utf-8", categories=["Zs", "Cc"]), max_size=6),
    st.text(st.characters(min_codepoint=0x300, max_codepoint=0x36F), max_size=3),  # combining marks
    st.text("0123456789٠١٢٣४५", max_size=8),
    st.text(st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF), max_size=6),  # CJK
    st.text(st.characters(min_codepoint=0x1F300, max_codepoint=0x1FAFF), max_size=4),  # emoji
    st.sampled_from(["\u200d", "\ufe0f", "\U0001f3fd", "'s", "'LL", "'ſ", "\u212a", "\r\n", "\n\n", "  ", "\t"]),
    st.sampled_from(["\u0338", ">\u0338", "e\u0301", "\u1100\u1161", '{"a": [1, 2]}', "def f(x):\n    return"]),
)


def random_text(name: str) -> st.SearchStrategy[str]:
    return st.lists(st.one_of(PIECES, st.sampled_from(special_tokens(name))), max_size=12).map("".join)


@pytest.mark.parametrize("name", FAST)
def test_random_unicode_gives_hf_ids(name: str) -> None:
    encoder, backend = fast(name), reference(name)
    plain = without_added_tokens(backend)

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
    @given(random_text(name))
    def same_ids(text: str) -> None:
        assert encoder.encode(text) == hf_ids(backend, text)
        assert encoder.encode_ordinary(text) == hf_ids(plain, text)

    same_ids()


@pytest.mark.parametrize("name", ["qwen3", "qwen3.5"])
def test_every_code_point_in_context_gives_hf_ids(name: str) -> None:
    """Every code point Python's tables assign (the others go to HF whole), in runs and after a letter, a space, an
    apostrophe and a `>` (NFC composes U+0338 with it)."""
    encoder, plain = fast(name), without_added_tokens(reference(name))
    points = [chr(point) for point in range(0x110000) if unicodedata.category(chr(point)) not in ("Cn", "Cs")]
    texts = [
        "".join(context + char for char in points[start : start + 128])
        for context in ("", "a", " ", "'", ">")
        for start in range(0, len(points), 128)
    ]
    expected = [list(encoding.ids) for encoding in plain.encode_batch_fast(texts, add_special_tokens=False)]
    mismatched = [text[:40] for text, ids in zip(texts, expected, strict=True) if encoder.encode_ordinary(text) != ids]
    assert not mismatched


def test_short_pieces_between_added_tokens_are_remembered_up_to_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pieces a template writes around every message are tokenized once; the ids stay HF's each time."""
    encoder, backend = fast("qwen3"), reference("qwen3")
    monkeypatch.setattr(encoder, "_remembered", {})
    monkeypatch.setattr("tito.fast_encoding._REMEMBERED_KEPT", 2)
    text = "<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\nA reply longer than sixteen characters<|im_end|>"
    for _ in range(2):
        assert encoder.encode(text) == hf_ids(backend, text)
    assert encoder._remembered == {"user\n": hf_ids(backend, "user\n"), "\n": hf_ids(backend, "\n")}


def test_the_fast_path_is_taken_for_agent_text() -> None:
    """A text goes to HF only for a lone surrogate or a code point the two Unicode tables disagree on."""
    encoder = fast("qwen3")
    for text in ("def f(x):\n    return x", "日本語のテキスト", "naïve café 👍🏽", '{"k": [1, 2]}'):
        assert encoder.takes_fast_path(text), text
    for text in ("a\ud800b", "new in Unicode 15: \u0897"):
        assert not encoder.takes_fast_path(text), text


@pytest.mark.parametrize("text", ["a\ud800b", "\udfff", "<|im_end|>\ud83d"])
def test_a_lone_surrogate_fails_as_hf_fails(text: str) -> None:
    encoder, backend = fast("qwen3"), reference("qwen3")
    with pytest.raises(Exception) as by_hf:
        backend.encode_batch_fast([text], add_special_tokens=False)
    with pytest.raises(by_hf.type):
        encoder.encode(text)


def tiny_byte_level_bpe(merges: list[tuple[str, str]], ignore_merges: bool = False, **edits: Any) -> BackendTokenizer:
    """A byte-level BPE of the 256 bytes plus `merges`, with Qwen3's pre-tokenizer and NFC (tokenizer.json)."""
    to_char = byte_to_unicode()
    vocab = {to_char[byte]: byte for byte in range(256)}
    for left, right in merges:
        vocab.setdefault(left + right, len(vocab))
    spec = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": len(vocab), "content": "<|end|>", "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True},
        ],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN_PRE_TOKENIZER_PATTERNS[0]}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        ]},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": ignore_merges,
                  "vocab": vocab, "merges": [[left, right] for left, right in merges]},
        **edits,
    }  # fmt: skip
    return BackendTokenizer.from_str(json.dumps(spec))


IN_RANK_ORDER = [("t", "h"), ("th", "e"), ("Ġ", "the"), ("i", "n")]


@cache
def tiny_in_rank_order() -> BackendTokenizer:
    return tiny_byte_level_bpe(IN_RANK_ORDER)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(["the", " the", "in", "th", "<|end|>", "é", " ", "\n", "ſ", "x"]), max_size=20))
def test_a_byte_level_bpe_in_rank_order_gives_hf_ids(words: list[str]) -> None:
    backend = tiny_in_rank_order()
    verdict = fast_encoder_for(backend)
    assert verdict.encoder is not None, verdict.reason
    text = "".join(words)
    assert verdict.encoder.encode(text) == hf_ids(backend, text)


def refusal(backend: BackendTokenizer) -> str:
    verdict: Verdict = fast_encoder_for(backend)
    assert verdict.encoder is None
    return verdict.reason


def test_merges_out_of_rank_order_stay_on_hf() -> None:
    """Vocab ids follow first appearance; a later merge making a lower-ranked token breaks tiktoken's rank order."""
    tokenizer = tiny_byte_level_bpe([("t", "h"), ("i", "n")])
    spec = json.loads(tokenizer.to_str())
    spec["model"]["merges"].reverse()
    assert "not in rank order" in refusal(BackendTokenizer.from_str(json.dumps(spec)))


def test_a_token_its_merges_never_make_stays_on_hf() -> None:
    """Without ignore_merges HF never makes `xyz` from x, y, z when no merge chain leads there; tiktoken would look
    the whole piece up."""
    tokenizer = tiny_byte_level_bpe([("x", "y")])
    spec = json.loads(tokenizer.to_str())
    spec["model"]["vocab"]["xyz"] = len(spec["model"]["vocab"])
    spec["added_tokens"][0]["id"] = len(spec["model"]["vocab"])
    assert "not what the merges make" in refusal(BackendTokenizer.from_str(json.dumps(spec)))


@pytest.mark.parametrize(
    ("edits", "reason"),
    [
        ({"normalizer": {"type": "Lowercase"}}, "is not NFC"),
        ({"truncation": {"direction": "Right", "max_length": 8, "strategy": "LongestFirst", "stride": 0}}, "truncates"),
        ({"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": True}},
         "not one isolated Split"),
    ],
)  # fmt: skip
def test_parts_tiktoken_cannot_express_stay_on_hf(edits: dict[str, Any], reason: str) -> None:
    assert reason in refusal(tiny_byte_level_bpe(IN_RANK_ORDER, **edits))


def test_an_unaudited_pattern_stays_on_hf() -> None:
    tokenizer = tiny_byte_level_bpe(IN_RANK_ORDER)
    spec = json.loads(tokenizer.to_str())
    spec["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = r"\p{L}+"
    assert "not one audited" in refusal(BackendTokenizer.from_str(json.dumps(spec)))


def test_a_stripped_added_token_stays_on_hf() -> None:
    tokenizer = tiny_byte_level_bpe(IN_RANK_ORDER)
    spec = json.loads(tokenizer.to_str())
    spec["added_tokens"][0]["lstrip"] = True
    assert "stripped" in refusal(BackendTokenizer.from_str(json.dumps(spec)))


def test_the_variable_keeps_every_tokenizer_on_hf(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DISABLE_VARIABLE, "0")
    assert DISABLE_VARIABLE in refusal(tiny_byte_level_bpe(IN_RANK_ORDER))


def test_a_tokenizer_that_splits_special_tokens_stays_on_hf() -> None:
    tokenizer = tiny_byte_level_bpe(IN_RANK_ORDER)
    tokenizer.encode_special_tokens = True
    assert "split_special_tokens" in refusal(tokenizer)


WHITESPACE_RUNS = st.lists(
    st.sampled_from([" ", "  ", "\t", "\n", "\r\n", "\r", "\x0b", "\x0c", "\x85", "\xa0", "\u3000", "a", "Ab", "7",
                     "!", "'s", "é", "\u0301", "日", ".\n", "- ", "\n    ", "\t\t}", "<|im_end|>"]),
    max_size=16,
).map("".join)  # fmt: skip
"""Runs of every kind of whitespace before letters, digits, punctuation and the end: where the patterns' one
lookahead alternative (`\\s+(?!\\S)`) decides the pieces."""


@pytest.mark.parametrize("name", ["qwen3", "qwen3.5"])
def test_the_grouped_pattern_gives_the_audited_patterns_ids(name: str) -> None:
    """tiktoken runs the audited pattern with its lookahead-free alternatives grouped (`grouped_pattern`): the same
    ids as the pattern as published, and as HF, around whitespace runs and on random Unicode."""
    encoder, plain = fast(name), without_added_tokens(reference(name))
    pattern = json.loads(reference(name).to_str())["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]
    assert encoder.encoding._pat_str == grouped_pattern(pattern) != pattern
    published = tiktoken.Encoding("published", pat_str=pattern, mergeable_ranks=encoder.encoding._mergeable_ranks,
                                  special_tokens={})  # fmt: skip

    @settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
    @given(st.one_of(WHITESPACE_RUNS, random_text(name)))
    def same_ids(text: str) -> None:
        assert encoder.encoding.encode_ordinary(text) == published.encode_ordinary(text)
        assert encoder.encode_ordinary(text) == hf_ids(plain, text)

    same_ids()
