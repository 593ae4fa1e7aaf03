"""One request's seeded sampler: penalties, temperature, top-k/top-p/min-p, then an exponential race.

The race (`argmax(logp - log E)`, `E ~ Exp(1)` drawn from the request's own generator) samples exactly from the
filtered distribution, and unlike an inverse CDF it does not flip when matmul blocking moves logits by ~1e-6,
so a seed gives the same ids alone, in a batch, or after a prefix-cache hit. The logprob returned is
`log_softmax(penalized_logits / T)[id]` (`LogprobSemantics.AFTER_TEMPERATURE`, before top-k/top-p/min-p
filtering); greedy (T == 0) returns `log_softmax(penalized_logits)[id]`.

Imports nothing from tito but engines.protocol and errors.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Sequence

import torch

from tito.engines.protocol import SamplingParams, TopLogprobs
from tito.errors import EngineRequestError


def check_sampling(params: SamplingParams) -> None:
    """Raise `EngineRequestError` naming the first parameter out of range."""
    problems = [
        (params.max_new_tokens < 0, f"max_new_tokens must be >= 0, got {params.max_new_tokens}"),
        (params.temperature < 0, f"temperature must be >= 0, got {params.temperature}"),
        (not 0 < params.top_p <= 1, f"top_p must be in (0, 1], got {params.top_p}"),
        (params.top_k is not None and params.top_k < 1, f"top_k must be None or >= 1, got {params.top_k}"),
        (not 0 <= params.min_p <= 1, f"min_p must be in [0, 1], got {params.min_p}"),
        (params.repetition_penalty <= 0, f"repetition_penalty must be > 0, got {params.repetition_penalty}"),
    ]
    for failed, message in problems:
        if failed:
            raise EngineRequestError("local", message)


class Sampler:
    """Samples one id per call from a row of logits and keeps the per-request state penalties need."""

    def __init__(self, params: SamplingParams, prompt_ids: Sequence[int], vocab_size: int, device: torch.device):
        check_sampling(params)
        self._params = params
        seed = params.seed if params.seed is not None else secrets.randbits(63)
        self._generator = torch.Generator(device=device).manual_seed(seed)
        self._seen: torch.Tensor | None = None
        if params.repetition_penalty != 1.0:
            self._seen = torch.zeros(vocab_size, dtype=torch.bool, device=device)
            self._seen[torch.tensor(list(prompt_ids), dtype=torch.long, device=device)] = True
        self._counts: torch.Tensor | None = None
        if params.presence_penalty or params.frequency_penalty:
            self._counts = torch.zeros(vocab_size, dtype=torch.float32, device=device)

    def sample(self, logits: torch.Tensor) -> tuple[int, float, TopLogprobs]:
        """The sampled id, its logprob and (when `top_logprobs` asks) the most likely ids with theirs, from one row
        of logits (vocab,); the top ones are read from the same logprobs as the sampled one."""
        logits = self._penalize(logits.float())
        params = self._params
        if params.temperature == 0:
            logprobs = torch.log_softmax(logits, dim=-1)
            token = int(torch.argmax(logits))
            logprob = float(logprobs[token])
        else:
            logprobs = torch.log_softmax(logits / params.temperature, dim=-1)
            candidates = self._filter(logprobs)
            # E = -log(U) ~ Exp(1); torch.rand costs a fifth of exponential_ over a 150k vocabulary.
            uniform = torch.rand(candidates.shape, generator=self._generator, device=candidates.device)
            token = int(torch.argmax(candidates - torch.log(-torch.log(uniform))))
            logprob = float(logprobs[token])
        self._record(token)
        return token, logprob, self._top(logprobs)

    def _top(self, logprobs: torch.Tensor) -> TopLogprobs:
        if not self._params.top_logprobs:
            return ()
        values, ids = torch.topk(logprobs, min(self._params.top_logprobs, logprobs.numel()))
        return tuple(zip(ids.tolist(), values.tolist(), strict=True))

    def _penalize(self, logits: torch.Tensor) -> torch.Tensor:
        params = self._params
        if self._seen is not None:
            penalty = params.repetition_penalty
            scaled = torch.where(logits > 0, logits / penalty, logits * penalty)
            logits = torch.where(self._seen, scaled, logits)
        if self._counts is not None:
            logits = logits - params.frequency_penalty * self._counts
            logits = logits - params.presence_penalty * (self._counts > 0).float()
        return logits

    def _filter(self, logprobs: torch.Tensor) -> torch.Tensor:
        """The logprobs with ids outside top-k, top-p and min-p set to -inf (the most likely id always stays)."""
        params = self._params
        if params.top_k is None and params.top_p >= 1 and params.min_p <= 0:
            return logprobs
        keep = torch.ones_like(logprobs, dtype=torch.bool)
        if params.top_k is not None and params.top_k < logprobs.numel():
            keep &= logprobs >= torch.topk(logprobs, params.top_k).values[-1]
        if params.top_p < 1:
            ordered, order = torch.sort(logprobs, descending=True)
            probabilities = ordered.exp()
            mass_before = torch.cumsum(probabilities, dim=-1) - probabilities
            in_nucleus = torch.empty_like(keep)
            in_nucleus[order] = mass_before < params.top_p
            keep &= in_nucleus
        if params.min_p > 0:
            keep &= logprobs >= logprobs.max() + math.log(params.min_p)
        return torch.where(keep, logprobs, torch.full_like(logprobs, -math.inf))

    def _record(self, token: int) -> None:
        if self._seen is not None:
            self._seen[token] = True
        if self._counts is not None:
            self._counts[token] += 1
