"""prime-rl: `TrainingSample`s in their msgspec `array_like` wire form (prime-rl is not on PyPI, so its own type
cannot check them here: docs/trainers.md says so); tito's facts and the rewards beside them, never inside."""

from __future__ import annotations

from tito.trajectory.exports import prime_rl

from .samples import all_samples, tree_samples


def test_each_sample_is_an_array_of_the_required_fields_in_declaration_order() -> None:
    samples = all_samples()
    document = prime_rl.export(samples)
    assert set(document) == {"training_samples", "rewards", "tito"}
    for sample, record in zip(samples, document["training_samples"], strict=True):
        token_ids, mask, logprobs, temperatures, env_name = record
        assert token_ids == sample.tokens.tolist() and mask == [bool(m) for m in sample.loss_mask]
        assert len(logprobs) == len(temperatures) == len(token_ids) and isinstance(env_name, str)
    assert document["rewards"] == [sample.reward for sample in samples]


def test_each_token_carries_the_temperature_of_the_turn_that_owns_it() -> None:
    sample = tree_samples()[0]
    (record,) = prime_rl.export([sample])["training_samples"]
    for span, expected in zip(sample.spans, [0.6, 0.8, 1.0], strict=True):
        assert set(record[3][span.prompt_start : span.end]) == {expected}
    assert record[4] == "math"
