"""TRL: the samples as a GRPOTrainer rollout_func result (TRL 1.16.0). The real trainer takes it in
tests/examples/test_grpo_trl.py (`-m trainers`); here, without TRL installed, its contract: the three required
columns, `env_mask` the loss mask over the completion, and the reward column a reward function returns."""

from __future__ import annotations

from tito.trajectory.exports import trl

from .samples import all_samples


def test_the_rollout_columns_split_each_sample_at_its_first_sampled_id() -> None:
    samples = all_samples()
    columns = trl.export(samples)
    assert set(trl.REQUIRED) <= set(columns) and set(columns) == {*trl.REQUIRED, "env_mask", "reward", "tito"}
    for index, sample in enumerate(samples):
        prompt, completion = columns["prompt_ids"][index], columns["completion_ids"][index]
        assert prompt + completion == sample.tokens.tolist() and len(completion) == sample.response_length
        assert columns["env_mask"][index] == sample.loss_mask.tolist()[len(prompt) :]
        assert len(columns["logprobs"][index]) == len(completion)
        assert columns["reward"][index] == sample.reward
