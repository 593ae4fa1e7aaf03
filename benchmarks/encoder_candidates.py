"""Other registry encoders beside tito's FastEncoder: are their ids HF's, and are they faster? (issue 34)

tiktoken's pre-tokenizer regex is most of FastEncoder's cost; an encoder would replace it only if it builds from the
tokenizer.json alone, gives HF's ids on every text tried and is clearly faster. This checks the candidates that are
installed (they are not tito dependencies: install them in a scratch venv, e.g. `pip install -e . tokie==0.1.4
kitoken==0.11.1`), on the reference Qwen tokenizers:
  ids    mismatches vs HF (add_special_tokens=False) on ~4 KB tool outputs, chat-template turns and random strings
         over the pattern's edge cases (whitespace kinds, contractions, digits, marks, emoji, letter numbers)
  us     median microseconds per ~4 KB tool output, each encoder called in turn on the same text
(bpe-openai and rs-bpe are not here: their Python APIs build only the OpenAI encodings they ship.)

Run: python benchmarks/encoder_candidates.py [--tokenizers qwen3 qwen3.5] [--random 20000]
"""

from __future__ import annotations

import argparse
import importlib
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from tokenizers import Tokenizer as BackendTokenizer

from server_overhead import tool_output  # benchmarks/ is the script's directory
from tito.fast_encoding import fast_encoder_for

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference" / "tokenizers"
EDGES = [*" \t\n\r\x0b\x0c\x85\u00a0\u3000'\"sStTlLdDmMrReEvV\u017f\u212a09\u0660\u00b2.,:!?-_/(){}<>#aé日\u0301\u0338"]
EDGES += ["😀", "👍🏽", "\u200d", "Ⅻ", "'ll", "\r\n", "  \n", "<|im_end|>", "<think>"]
Encode = Callable[[str], list[int]]


def candidates(path: str) -> dict[str, Encode]:
    """The installed candidates, each built from the tokenizer.json alone (added tokens split as HF splits them)."""
    found: dict[str, Encode] = {}
    try:
        tokie = importlib.import_module("tokie").Tokenizer.from_json(path)
        found["tokie"] = lambda text: list(tokie.encode(text, add_special_tokens=False).ids)
    except ImportError:
        pass
    try:
        kitoken = importlib.import_module("kitoken").Kitoken.from_tokenizers_file(path)
        found["kitoken"] = lambda text: list(kitoken.encode(text, True))
    except ImportError:
        pass
    return found


def texts(random_count: int) -> tuple[list[str], list[str]]:
    """The ~4 KB tool outputs (timed), and those plus template turns and edge-case strings (checked)."""
    outputs = [tool_output(agent, step, 4000) for agent in range(8) for step in range(8)]
    turns = [f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n" for text in outputs]
    rng = random.Random(0)
    edges = ["".join(rng.choices(EDGES, k=rng.randint(1, 30))) for _ in range(random_count)]
    return outputs, outputs + turns + edges


def main() -> None:
    parser = argparse.ArgumentParser(description="Registry encoders beside FastEncoder: HF ids and speed")
    parser.add_argument("--tokenizers", nargs="+", default=["qwen3", "qwen3.5"])
    parser.add_argument("--random", type=int, default=20000, help="edge-case strings checked")
    args = parser.parse_args()
    timed, checked = texts(args.random)
    print(f"{'tokenizer':10} {'encoder':8} {'mismatches':>10} {'us/4KB':>7} {'vs fast':>7}  first mismatch")
    for name in args.tokenizers:
        path = str(REFERENCE / name / "tokenizer.json")
        backend = BackendTokenizer.from_file(path)
        verdict = fast_encoder_for(backend)
        assert verdict.encoder is not None, verdict.reason
        encoders: dict[str, Encode] = {"fast": verdict.encoder.encode, **candidates(path)}
        wrong: dict[str, list[str]] = {label: [] for label in encoders}
        for text in checked:
            expected = list(backend.encode(text, add_special_tokens=False).ids)
            for label, encode in encoders.items():
                if encode(text) != expected:
                    wrong[label].append(text)
        spent: dict[str, list[int]] = {label: [] for label in encoders}
        for _ in range(10):
            for text in timed:
                for label, encode in encoders.items():
                    started = time.perf_counter_ns()
                    encode(text)
                    spent[label].append(time.perf_counter_ns() - started)
        fast_us = statistics.median(spent["fast"]) / 1000
        for label in encoders:
            us = statistics.median(spent[label]) / 1000
            first = repr(min(wrong[label], key=len)) if wrong[label] else ""
            print(f"{name:10} {label:8} {len(wrong[label]):>10} {us:>7.1f} {fast_us / us:>6.2f}x  {first}")


if __name__ == "__main__":
    main()
