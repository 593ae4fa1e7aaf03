"""prime-rl: each sample is a TrainingSample (prime-rl 0.8.0, `src/prime_rl/transports/rollouts/types.py`).

prime-rl is not on PyPI (and its msgspec is not installed here), so its required fields are mirrored with their
types; the check is strict: exactly those fields plus tito's own `tito` entry, every array as long as
`token_ids`, the mask booleans, and each token's temperature the one its turn sampled with.
"""

from __future__ import annotations

from typing import Any, get_type_hints

from tito.trajectory.exports import prime_rl

from .samples import all_samples, tree_samples


class TrainingSample:
    """The required fields of prime_rl.transports.rollouts.types.TrainingSample (its optional ones are omitted)."""

    token_ids: list[int]
    mask: list[bool]
    logprobs: list[float]
    temperatures: list[float]
    env_name: str


def conforms(record: dict[str, Any]) -> bool:
    hints = get_type_hints(TrainingSample)
    if set(record) != {*hints, "tito"}:
        return False
    item_type = {list[int]: int, list[bool]: bool, list[float]: float}
    for name, hint in hints.items():
        value = record[name]
        if hint is str and not isinstance(value, str):
            return False
        if hint in item_type and not all(type(item) is item_type[hint] for item in value):
            return False
    return True


def test_every_sample_conforms_to_training_sample_with_aligned_arrays() -> None:
    samples = all_samples()
    for sample, record in zip(samples, prime_rl.export(samples), strict=True):
        assert conforms(record), record
        length = len(record["token_ids"])
        assert len(record["mask"]) == len(record["logprobs"]) == len(record["temperatures"]) == length
        assert record["mask"] == [bool(m) for m in sample.loss_mask]
    assert not conforms({**prime_rl.export(samples)[0], "mask": [1, 0]}), "the checker bites on int masks"


def test_each_token_carries_the_temperature_of_the_turn_that_owns_it() -> None:
    sample = tree_samples()[0]
    record = prime_rl.export([sample])[0]
    for span, expected in zip(sample.spans, [0.6, 0.8, 1.0], strict=True):
        assert set(record["temperatures"][span.prompt_start : span.end]) == {expected}
    assert record["env_name"] == "math"
