"""verl 0.9.1, installed (the cached `trainers-verl` venv of scripts/trainer_venvs.sh): tito's export becomes verl's own
`AgentLoopOutput`, verl's agent loop worker pads it (`_agent_loop_postprocess`) and batches it (`_postprocess`) into a
`DataProto`, and verl's GRPO computes advantages per group from the `uid` tito wrote. The worker is verl's class with
the attributes its constructor would set from a config (a real constructor needs Ray, a model and an inference
server)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from transformers import PreTrainedTokenizerFast
from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, AgentLoopWorker
from verl.protocol import DataProto
from verl.trainer.ppo.core_algos import AdvantageEstimator
from verl.trainer.ppo.ray_trainer import compute_advantage

from tito.trajectory.exports import verl
from tito.trajectory.samples import Sample

from ..rollouts import BUDGETS, rollout

pytestmark = pytest.mark.trainers


def worker(prompt_length: int, response_length: int) -> AgentLoopWorker:
    """verl's worker, with what its constructor sets for a text model without rewards, teacher or processor."""
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel({"<pad>": 0}, unk_token="<pad>")),
                                        pad_token="<pad>")  # fmt: skip
    built = AgentLoopWorker.__new__(AgentLoopWorker)
    built.tokenizer, built.processor, built.mm_processor_kwargs = tokenizer, None, {}
    built.reward_loop_worker_handles, built.distillation_enabled = None, False
    built.rollout_config = SimpleNamespace(prompt_length=prompt_length, response_length=response_length)
    return built


def to_data_proto(samples: list[Sample], prompt_length: int, response_length: int) -> DataProto:
    loop = worker(prompt_length, response_length)
    outputs = [AgentLoopOutput.model_validate(record) for record in verl.export(samples)]

    async def padded() -> list:
        return [await loop._agent_loop_postprocess(output, False, raw_prompt=[]) for output in outputs]

    return loop._postprocess(asyncio.run(padded()))


def test_the_export_becomes_verls_batch_with_the_ids_masks_logprobs_and_reward_where_verl_puts_them() -> None:
    samples = rollout(BUDGETS)
    batch = to_data_proto(samples, BUDGETS.prompt_length, BUDGETS.response_length)
    for row, sample in enumerate(samples):
        prompt = len(sample.tokens) - sample.response_length
        attention = batch.batch["attention_mask"][row].bool()
        assert batch.batch["input_ids"][row][attention].tolist() == sample.tokens.tolist()
        response = slice(0, sample.response_length)
        assert batch.batch["response_mask"][row][response].tolist() == sample.loss_mask[prompt:].tolist()
        assert torch.equal(batch.batch["rollout_log_probs"][row][response],
                           torch.tensor(sample.rollout_logprobs[prompt:].tolist()))  # fmt: skip
        scores = batch.batch["rm_scores"][row]
        assert scores[sample.response_length - 1] == sample.reward and scores.sum() == sample.reward
    assert batch.non_tensor_batch["uid"].tolist() == ["g1", "g1", "g2"]
    assert batch.non_tensor_batch["__num_turns__"].tolist() == [6, 4, 4], "verl: 1 + assistant turns + tool rounds"


def test_verls_grpo_normalises_rewards_within_each_uid_group() -> None:
    batch = to_data_proto(rollout(BUDGETS), BUDGETS.prompt_length, BUDGETS.response_length)
    batch.batch["token_level_rewards"] = batch.batch["rm_scores"]
    advantaged = compute_advantage(batch, adv_estimator=AdvantageEstimator.GRPO)
    per_sample = (advantaged.batch["advantages"] * batch.batch["response_mask"]).sum(-1) / batch.batch[
        "response_mask"
    ].sum(-1)
    first, second, alone = per_sample.tolist()
    assert first > 0 > second and first == pytest.approx(-second), "g1: 1.0 and 0.0 normalised against each other"
    assert alone == pytest.approx(0.5, abs=1e-5), "g2 has one sample: verl keeps its score (mean 0, std 1 for one)"


def test_an_uncut_record_longer_than_verls_budgets_breaks_its_batch_so_the_budgets_are_needed() -> None:
    with pytest.raises((ValueError, RuntimeError)):
        to_data_proto(rollout(), BUDGETS.prompt_length, BUDGETS.response_length)
    assert np.all([len(s.tokens) - s.response_length <= BUDGETS.prompt_length for s in rollout(BUDGETS)])
