"""The seeded sampler: exact greedy, seeded reproducibility, the race samples the softmax, filters and penalties."""

from __future__ import annotations

import math
from collections import Counter

import pytest
import torch

from tito.engines.local.sampler import Sampler
from tito.engines.protocol import SamplingParams
from tito.errors import EngineRequestError

CPU = torch.device("cpu")
LOGITS = torch.tensor([2.0, 1.0, 0.5, -1.0, -3.0])


def sampler(**params: object) -> Sampler:
    return Sampler(SamplingParams(**{"max_new_tokens": 100, **params}), [], 5, CPU)  # type: ignore[arg-type]


def draws(count: int, **params: object) -> Counter[int]:
    one = sampler(**params)
    return Counter(one.sample(LOGITS)[0] for _ in range(count))


def test_greedy_takes_the_argmax_with_its_untempered_logprob() -> None:
    token, logprob, _ = sampler(temperature=0.0).sample(LOGITS)
    assert token == 0
    assert logprob == pytest.approx(float(torch.log_softmax(LOGITS, -1)[0]))


def test_the_logprob_is_after_temperature() -> None:
    token, logprob, _ = sampler(temperature=0.5, seed=1).sample(LOGITS)
    assert logprob == pytest.approx(float(torch.log_softmax(LOGITS / 0.5, -1)[token]))


def test_top_logprobs_are_the_most_likely_ids_of_the_same_tempered_logprobs_the_sampled_one_has() -> None:
    token, logprob, top = sampler(temperature=0.5, seed=1, top_logprobs=3).sample(LOGITS)
    tempered = torch.log_softmax(LOGITS / 0.5, -1)
    assert [token_id for token_id, _ in top] == [0, 1, 2]
    assert [value for _, value in top] == pytest.approx(tempered[:3].tolist())
    assert dict(top).get(token, logprob) == pytest.approx(logprob)
    assert sampler(temperature=0.5).sample(LOGITS)[2] == ()  # not asked: none computed


def test_a_seed_repeats_its_ids_and_another_seed_differs() -> None:
    def run(seed: int) -> list[int]:
        one = sampler(seed=seed)
        return [one.sample(LOGITS)[0] for _ in range(40)]

    assert run(7) == run(7)
    assert run(7) != run(8)


def test_the_exponential_race_samples_the_softmax() -> None:
    counts = draws(4000, seed=0)
    expected = torch.softmax(LOGITS, -1).tolist()
    for token, probability in enumerate(expected):
        assert counts[token] / 4000 == pytest.approx(probability, abs=0.03)


@pytest.mark.parametrize(
    ("params", "allowed"),
    [
        ({"top_k": 2}, {0, 1}),
        ({"top_p": 0.5}, {0}),  # id 0 alone holds 0.61 of the mass
        ({"top_p": 0.8}, {0, 1}),
        ({"min_p": 0.3}, {0, 1}),  # p(1) / p(0) = e^-1 = 0.37, p(2) / p(0) = 0.22
    ],
)
def test_filters_keep_only_their_ids(params: dict[str, object], allowed: set[int]) -> None:
    assert set(draws(400, seed=2, **params)) == allowed


def test_repetition_penalty_pushes_a_seen_id_below_the_next() -> None:
    one = Sampler(SamplingParams(max_new_tokens=4, temperature=0.0, repetition_penalty=3.0), [0], 5, CPU)
    assert one.sample(LOGITS)[0] == 1  # 2.0 / 3 < 1.0


def test_presence_and_frequency_penalties_count_sampled_ids() -> None:
    one = sampler(temperature=0.0, frequency_penalty=0.6)
    assert [one.sample(LOGITS)[0] for _ in range(3)] == [0, 0, 1]  # 2.0, then 1.4, then 0.8 < 1.0
    other = sampler(temperature=0.0, presence_penalty=1.5)
    assert [other.sample(LOGITS)[0] for _ in range(2)] == [0, 1]


def test_the_logprob_includes_the_penalties() -> None:
    one = sampler(temperature=0.0, presence_penalty=1.5)
    one.sample(LOGITS)
    token, logprob, _ = one.sample(LOGITS)
    penalized = LOGITS - torch.tensor([1.5, 0, 0, 0, 0])
    assert logprob == pytest.approx(float(torch.log_softmax(penalized, -1)[token]))
    assert not math.isinf(logprob)


def test_an_out_of_range_parameter_is_named() -> None:
    with pytest.raises(EngineRequestError, match="min_p must be in"):
        sampler(min_p=1.5)
