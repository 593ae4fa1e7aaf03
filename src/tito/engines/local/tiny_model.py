"""A seeded random-weight Qwen3 (2 layers, hidden 64, head_dim 32) over a real vocabulary, for tests.

Tests that need a family's own ids (stop tokens, special markers) run this model on the family's tokenizer:
its text is noise, but loading, sampling, caching and logprobs behave as with a real checkpoint, in well under a
second per test. head_dim 32 keeps it loadable by vLLM's CPU backend as well.

Imports nothing from tito.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol


class HasVocabSize(Protocol):
    @property
    def vocab_size(self) -> int: ...


def build_tiny_model(
    vocab: int | HasVocabSize, directory: Path, seed: int = 0, eos_token_id: int | None = None
) -> Path:
    """Write a loadable checkpoint (config + safetensors) with weights drawn from `seed` to `directory`;
    `eos_token_id` goes into the config for servers that stop on it by default (vLLM)."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    vocab_size = vocab if isinstance(vocab, int) else vocab.vocab_size
    config = Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=192,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        max_position_embeddings=32768,
        tie_word_embeddings=True,
        eos_token_id=eos_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(config)
    model.save_pretrained(directory)
    return directory
