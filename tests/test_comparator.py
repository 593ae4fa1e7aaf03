"""The comparator types each kind of difference and decodes where it happened."""

from __future__ import annotations

from tito.comparator import MismatchType, compare_token_sequences
from tito.tokenizer_loading import LocalTokenizer

SPECIALS = ("<|im_start|>", "<|im_end|>")
TEXT = "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi there<|im_end|>\n"


def kinds(tokenizer: LocalTokenizer, expected_text: str, actual_ids: list[int]) -> list[MismatchType]:
    return [m.type for m in compare_token_sequences(tokenizer.encode(expected_text), actual_ids, tokenizer, SPECIALS)]


def test_equal_sequences_have_no_mismatch(qwen3_tokenizer: LocalTokenizer) -> None:
    assert kinds(qwen3_tokenizer, TEXT, qwen3_tokenizer.encode(TEXT)) == []


def test_each_kind_of_difference_is_typed(qwen3_tokenizer: LocalTokenizer) -> None:
    encode = qwen3_tokenizer.encode
    assert kinds(qwen3_tokenizer, TEXT, encode(TEXT.replace("Hello", "Hallo"))) == [MismatchType.NON_ASSISTANT_TEXT]
    assert kinds(qwen3_tokenizer, TEXT, encode(TEXT.replace("Hi there", "Hi here"))) == [MismatchType.ASSISTANT_TEXT]
    swapped = encode(TEXT.replace("Hi there<|im_end|>", "Hi there<|im_start|>"))
    assert kinds(qwen3_tokenizer, TEXT, swapped) == [MismatchType.SPECIAL_TOKEN_TYPE]
    dropped = encode(TEXT.replace("<|im_end|>\n<|im_start|>assistant", "\nassistant"))
    assert kinds(qwen3_tokenizer, TEXT, dropped) == [MismatchType.SPECIAL_TOKEN_STRUCTURE]


def test_report_names_the_position_and_decoded_context(qwen3_tokenizer: LocalTokenizer) -> None:
    expected = qwen3_tokenizer.encode(TEXT)
    actual = qwen3_tokenizer.encode(TEXT.replace("Hello", "Hallo"))
    (mismatch,) = compare_token_sequences(expected, actual, qwen3_tokenizer, SPECIALS)
    assert expected[mismatch.position] != actual[mismatch.position]
    assert "Hello" in mismatch.expected and "Hallo" in mismatch.actual
