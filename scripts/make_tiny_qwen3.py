"""Write a tiny random Qwen3 (real 151,936-id vocab, seeded weights) and tito's offline Qwen3 tokenizer to a directory.

Engines that load a model directory (vLLM, transformers) all read the same weights from it, so their logprobs
for the same ids can be compared. The model is the local engine's `build_tiny_model`; no model hub: the tokenizer
is `tito.load_tokenizer("qwen3")`.
Run from the repository root: PYTHONPATH=src python scripts/make_tiny_qwen3.py DIR
"""

from __future__ import annotations

import argparse
from pathlib import Path

from transformers import PreTrainedTokenizerFast

from tito import load_tokenizer
from tito.engines.local import build_tiny_model

QWEN3_VOCAB_SIZE = 151936
"""The checkpoints' padded embedding size (the tokenizer itself has fewer ids)."""
IM_END = 151645
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def write_tiny_qwen3(directory: Path, seed: int = 0) -> None:
    build_tiny_model(QWEN3_VOCAB_SIZE, directory, seed, eos_token_id=IM_END)
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
