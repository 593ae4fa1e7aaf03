"""Appended text tokenized by HF `tokenizers` vs tito's tiktoken encoder (tito.fast_encoding), side by side.

For each tokenizer and each agent-like text of about 1,000 tokens (code, JSON tool output, prose, and a whole turn's
appended render: the tool's output after the assistant's call, through the family's template), one run measures:
  hf     the tokenizer's own encode (`tokenizers`' encode_batch_fast, add_special_tokens=False): tito before
  fast   tito.fast_encoding's encoder (added tokens split out, NFC, tiktoken); ids checked identical first
  turn   tokenize_additional_messages for that turn (render + tokenize + checks), HF vs fast: what a turn pays
Figures are microseconds per 1,000 tokens (turn: per turn), best of several runs, garbage collection paused.

Run: python benchmarks/tokenize_appended.py [--tokenizers qwen3 qwen35]
(Not tokenize.py: run as a script, that name would shadow the standard library's `tokenize`.)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from incremental import best_seconds  # benchmarks/ is the script's directory
from tito.conformance import TOOLS
from tito.fast_encoding import DISABLE_VARIABLE, fast_encoder_for
from tito.tokenizer import get_tito_tokenizer
from tito.tokenizer_loading import load_tokenizer

FAMILY = {"qwen3": "qwen3", "qwen35": "qwen35"}
SOURCE = Path(__file__).resolve().parents[1] / "src" / "tito" / "tokenizer.py"


def code() -> str:
    return SOURCE.read_text(encoding="utf-8")


def tool_json() -> str:
    rows = [
        {"path": f"src/module_{i}.py", "line": i * 7, "status": "FAILED" if i % 5 == 0 else "passed", "ms": i * 1.25}
        for i in range(400)
    ]
    return json.dumps({"results": rows, "summary": {"failed": 80, "passed": 320}}, indent=2)


def prose() -> str:
    return (
        "The agent inspected the repository, ran the test suite, and found that the junction between turns "
        "dropped a newline token; it then patched the template, re-ran every check, and wrote a short note for "
        "the reviewer explaining why the change was safe. "
    ) * 60


def trimmed(tokenizer: Any, text: str, tokens: int = 1000) -> str:
    """The leading part of `text` of about `tokens` tokens."""
    ids = tokenizer.encode(text, add_special_tokens=False)[:tokens]
    return str(tokenizer.decode(ids))


def turn(output: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A history ending in the assistant's tool call, and the same with the tool's output appended."""
    call = {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": {"query": "junction"}}}
    old: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the failing tests."},
        {"role": "assistant", "content": "", "reasoning_content": "Look first.", "tool_calls": [call]},
    ]
    return old, [*old, {"role": "tool", "tool_call_id": "call_1", "content": output}]


def measure(name: str, rounds: int = 5) -> list[tuple[str, int, float, float]]:
    hf_tokenizer = load_tokenizer(name)
    verdict = fast_encoder_for(hf_tokenizer.backend)
    print(f"{name}: {verdict.reason}", file=sys.stderr)
    encoder = verdict.encoder
    if encoder is None:
        return []
    os.environ[DISABLE_VARIABLE] = "0"
    hf_only = load_tokenizer(name)  # a second object, so its verdict is HF
    hf_turns = get_tito_tokenizer(hf_only, FAMILY[name])
    del os.environ[DISABLE_VARIABLE]
    fast_turns = get_tito_tokenizer(hf_tokenizer, FAMILY[name])
    texts = {
        kind: trimmed(hf_tokenizer, make()) for kind, make in (("code", code), ("json", tool_json), ("prose", prose))
    }
    cases: list[tuple[str, int, Callable[[], object], Callable[[], object]]] = []
    for kind, text in texts.items():
        expected = hf_tokenizer.encode(text)
        assert encoder.encode(text) == expected, f"{name} {kind}: ids differ; the timing would mean nothing"
        cases.append((kind, len(expected), lambda t=text: hf_tokenizer.encode(t), lambda t=text: encoder.encode(t)))
    old, new = turn(texts["json"])
    assert fast_turns.tokenize_additional_messages(old, new, TOOLS) == hf_turns.tokenize_additional_messages(
        old, new, TOOLS
    )
    appended = len(fast_turns.tokenize_additional_messages(old, new, TOOLS))
    cases.append(
        (
            "turn",
            appended,
            lambda: hf_turns.tokenize_additional_messages(old, new, TOOLS),
            lambda: fast_turns.tokenize_additional_messages(old, new, TOOLS),
        )
    )
    best: dict[str, list[float]] = {kind: [float("inf"), float("inf")] for kind, *_ in cases}
    for _ in range(rounds):
        for kind, _, hf, fast in cases:
            best[kind][0] = min(best[kind][0], best_seconds(hf))
            best[kind][1] = min(best[kind][1], best_seconds(fast))
    return [(kind, tokens, best[kind][0], best[kind][1]) for kind, tokens, *_ in cases]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizers", nargs="+", default=list(FAMILY), choices=list(FAMILY))
    args = parser.parse_args()
    print(f"{'tokenizer':10} {'text':6} {'tokens':>7} {'hf us/1k':>9} {'fast us/1k':>11} {'hf/fast':>8}")
    for name in args.tokenizers:
        for kind, tokens, hf, fast in measure(name):
            scale = 1e6 * (1000 / tokens if kind != "turn" else 1.0)
            label = f"{kind} (us/turn)" if kind == "turn" else kind
            print(
                f"{name:10} {label:6} {tokens:7d} {hf * scale:9.0f} {fast * scale:11.0f} {hf / fast:8.2f}", flush=True
            )
    print("turn: microseconds per turn (its appended ids: the tool output and the generation prompt), not per 1k")
    return 0


if __name__ == "__main__":
    sys.exit(main())
