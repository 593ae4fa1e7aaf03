"""The seeded tiny Qwen3: same seed, same weights; the real vocabulary's size; loadable by transformers."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file

from tito.engines.local import build_tiny_model
from tito.tokenizer_loading import LocalTokenizer


def test_same_seed_same_weights_other_seed_other_weights(tmp_path: Path) -> None:
    first = load_file(build_tiny_model(1000, tmp_path / "a", seed=3) / "model.safetensors")
    again = load_file(build_tiny_model(1000, tmp_path / "b", seed=3) / "model.safetensors")
    other = load_file(build_tiny_model(1000, tmp_path / "c", seed=4) / "model.safetensors")
    assert all(torch.equal(first[name], again[name]) for name in first)
    assert not torch.equal(first["model.embed_tokens.weight"], other["model.embed_tokens.weight"])


def test_the_vocabulary_is_the_tokenizers(tiny_model_dir: Path, qwen3_tokenizer: LocalTokenizer) -> None:
    weights = load_file(tiny_model_dir / "model.safetensors")
    assert weights["model.embed_tokens.weight"].shape == (qwen3_tokenizer.vocab_size, 64)
