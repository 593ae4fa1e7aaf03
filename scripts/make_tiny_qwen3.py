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


def make_it_stop(directory: Path, mean_length: float) -> None:
    """Make the end-of-turn id likely at every step, so turns end with a stop token after about `mean_length` ids.

    Random weights never sample `<|im_end|>` out of 151,936 ids; a session whose turns are all cut by the length
    limit cannot continue (tito refuses to extend a cut turn). Embedding dimension 0 becomes a constant, so the
    residual stream carries it at every position and the final norm keeps it at about sqrt(hidden) = 8; with tied
    embeddings every logit shifts by the same amount except `<|im_end|>`'s, whose extra weight in that dimension
    raises it to e^boost / (e^boost + vocab) = 1 / mean_length. The other ids stay near uniform noise.
    """
    import math

    from safetensors.torch import load_file, save_file

    path = directory / "model.safetensors"
    weights = load_file(path)
    embedding = weights["model.embed_tokens.weight"]
    probability = 1.0 / mean_length
    boost = math.log(QWEN3_VOCAB_SIZE * probability / (1.0 - probability))
    embedding[:, 0] = 10.0
    embedding[IM_END, 0] += boost / math.sqrt(embedding.shape[1])
    save_file(weights, path, metadata={"format": "pt"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--stop-after",
        type=float,
        default=None,
        metavar="N",
        help="make turns end with <|im_end|> after about N sampled ids (tito verify-session)",
    )
    args = parser.parse_args()
    write_tiny_qwen3(args.directory, args.seed)
    if args.stop_after is not None:
        make_it_stop(args.directory, args.stop_after)
    print(args.directory)


if __name__ == "__main__":
    main()
