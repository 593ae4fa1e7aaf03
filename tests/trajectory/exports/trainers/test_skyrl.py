"""SkyRL 0.4.0, installed (the cached `trainers-py312` venv of scripts/trainer_venvs.sh, Python 3.12 as SkyRL requires):
tito's step-wise export, its `trajectory_ids` built as SkyRL's own `TrajectoryID`, passes SkyRL's
`validate_generator_output`, SkyRL's `merge_stepwise_output` joins each session's steps back into its sample, and
SkyRL's batch tensors hold its ids, masks, logprobs and reward."""

from __future__ import annotations

import pytest
import torch
from skyrl.train.dataset.preprocess import convert_prompts_responses_to_batch_tensors
from skyrl.train.generators.base import GeneratorOutput, TrajectoryID
from skyrl.train.generators.utils import merge_stepwise_output
from skyrl.train.utils.trainer_utils import validate_generator_output

from tito.trajectory.exports import skyrl

from ..rollouts import rollout

pytestmark = pytest.mark.trainers


def generator_output() -> GeneratorOutput:
    exported = skyrl.export(rollout())
    exported["trajectory_ids"] = [TrajectoryID(**entry) for entry in exported["trajectory_ids"]]
    return exported  # type: ignore[return-value]


def test_the_step_wise_export_validates_and_merges_back_into_one_row_per_session() -> None:
    samples, output = rollout(), generator_output()
    validate_generator_output(len(samples), output, step_wise=True)
    merged = merge_stepwise_output(output)
    assert len(merged["response_ids"]) == len(samples)
    for row, sample in enumerate(samples):
        prompt = len(sample.tokens) - sample.response_length
        assert merged["prompt_token_ids"][row] + merged["response_ids"][row] == sample.tokens.tolist()
        assert merged["loss_masks"][row] == sample.loss_mask[prompt:].tolist()
        assert merged["rollout_logprobs"][row] == pytest.approx(sample.rollout_logprobs[prompt:].tolist())
        assert sum(merged["rewards"][row]) == sample.reward
    instances = [tid.instance_id for tid in merged["trajectory_ids"]]
    assert instances == ["g1", "g1", "g2"], "SkyRL's GRPO groups by instance_id"
    assert len({tid.to_string() for tid in merged["trajectory_ids"]}) == 3, "sessions sampled apart never collide"


def test_skyrls_batch_tensors_hold_the_merged_rows() -> None:
    samples = rollout()
    merged = merge_stepwise_output(generator_output())
    sequences, attention, response_mask, rewards, loss_masks, logprobs, *_ = convert_prompts_responses_to_batch_tensors(
        0, merged["prompt_token_ids"], merged["response_ids"], merged["rewards"], merged["loss_masks"],
        merged["rollout_logprobs"],
    )  # fmt: skip
    for row, sample in enumerate(samples):
        assert sequences[row][attention[row].bool()].tolist() == sample.tokens.tolist()
        trained = loss_masks[row][response_mask[row].bool()]
        assert trained.tolist() == sample.loss_mask[len(sample.tokens) - sample.response_length :].tolist()
        assert rewards[row].sum().item() == pytest.approx(sample.reward)
        sampled = [lp for lp, m in zip(sample.rollout_logprobs, sample.loss_mask, strict=True) if m]
        assert torch.equal(logprobs[row][loss_masks[row].bool()], torch.tensor(sampled))
