"""Write a tiny random Qwen3 (real 151,936-id vocab, seeded weights) and tito's offline Qwen3 tokenizer to a directory.

Engines that load a model directory (vLLM, transformers) all read the same weights from it, so their logprobs
for the same ids can be compared. No model hub: the tokenizer is `tito.load_tokenizer("qwen3")`.
Run from the repository root: PYTHONPATH=src python scripts/make_tiny_qwen3.py DIR
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

from tito import load_tokenizer

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def tiny_qwen3_config() -> Qwen3Config:
    """2 layers, hidden 64, 2 heads of 32 (vLLM's CPU attention needs a head_dim it supports, 32 is the least)."""
    return Qwen3Config(
        vocab_size=151936,
        hidden_size=64,
        intermediate_size=192,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        rope_theta=1_000_000.0,
        bos_token_id=151643,
        eos_token_id=151645,
        torch_dtype="float32",
    )


def write_tiny_qwen3(directory: Path, seed: int = 0) -> None:
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(tiny_qwen3_config()).eval()
    model.save_pretrained(directory)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=load_tokenizer("qwen3").backend,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHAT_TEMPLATE,
    )
    tokenizer.save_pretrained(directory)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    write_tiny_qwen3(args.directory, args.seed)
    print(args.directory)


if __name__ == "__main__":
    main()
