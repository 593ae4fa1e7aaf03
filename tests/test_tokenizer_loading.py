"""Builtin tokenizers are the real ones; proxies keep every family marker atomic."""

from __future__ import annotations

import random

from tests.conftest import reference_path
from tito.tokenizer_loading import LocalTokenizer, build_proxy_tokenizer, load_tokenizer


def sample_texts() -> list[str]:
    rng = random.Random(0)
    alphabet = "abcXYZ 0123\n\t.,;:!?'\"()[]{}<>/\\|-_=+*&^%$#@~`éüß中文日本語한국어🙂👍🏽\u0301"
    texts = ["Hello, world!", "def f(x):\n    return x**2\n\n\n", "  leading and trailing  ", "naïve café"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 80))) for _ in range(400)]
    return texts


def test_built_qwen3_equals_the_reference_tokenizer(qwen3_tokenizer: LocalTokenizer) -> None:
    reference = load_tokenizer(reference_path("tokenizers", "qwen3"))
    for text in sample_texts():
        assert qwen3_tokenizer.encode(text) == reference.encode(text), text


def test_built_qwen35_equals_the_reference_tokenizer(qwen35_tokenizer: LocalTokenizer) -> None:
    reference = load_tokenizer(reference_path("tokenizers", "qwen3.5"))
    for text in sample_texts():
        assert qwen35_tokenizer.encode(text) == reference.encode(text), text


def test_qwen3_published_ids(qwen3_tokenizer: LocalTokenizer) -> None:
    """Ids published with Qwen3: <|im_start|> 151644, <|im_end|> 151645, <think> 151667, "\\n" 198."""
    assert qwen3_tokenizer.encode("<|im_start|><|im_end|><think>\n") == [151644, 151645, 151667, 198]


def test_proxy_keeps_markers_atomic_and_text_tokenization_real(qwen3_tokenizer: LocalTokenizer) -> None:
    proxy = build_proxy_tokenizer(["<|observation|>", "[e~["])
    assert len(proxy.encode("<|observation|>")) == 1 and len(proxy.encode("[e~[")) == 1
    assert proxy.encode("plain text here") == qwen3_tokenizer.encode("plain text here")
