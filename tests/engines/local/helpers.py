"""Requests and a plain-forward reference for the local engine tests."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from tito.engines.protocol import GenerateRequest, SamplingParams

_request_numbers = itertools.count()


def make_request(prompt_ids: Sequence[int], session_id: str | None = None, **sampling: object) -> GenerateRequest:
    params = SamplingParams(**{"max_new_tokens": 8, "temperature": 0.0, **sampling})  # type: ignore[arg-type]
    return GenerateRequest(list(prompt_ids), params, f"test-{next(_request_numbers)}", session_id)


def forward_logprobs(
    model_dir: Path, prompt_ids: Sequence[int], output_ids: Sequence[int], temperature: float = 1.0
) -> list[float]:
    """log_softmax(logits / T) of each output id, from one plain forward pass over prompt + output (no cache)."""
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    ids = torch.tensor([[*prompt_ids, *output_ids]])
    with torch.inference_mode():
        logits = model(input_ids=ids).logits[0].float()
    positions = torch.arange(len(prompt_ids) - 1, ids.shape[1] - 1)
    logprobs = torch.log_softmax(logits[positions] / temperature, dim=-1)
    picked: list[float] = logprobs[torch.arange(len(output_ids)), torch.tensor(list(output_ids))].tolist()
    return picked
