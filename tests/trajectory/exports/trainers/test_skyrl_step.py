"""A real optimisation step from tito's export through SkyRL 0.4's own API, on CPU: the step-wise export merged
by SkyRL (`merge_stepwise_output`), batched by SkyRL (`convert_prompts_responses_to_batch_tensors`), GRPO
advantages from SkyRL (`compute_advantages_and_returns`, grouped by the trajectory ids' `instance_id`), SkyRL's
PPO policy loss (`PolicyLossRegistry`'s `regular`, with SkyRL's `AlgorithmConfig` and the rollout logprobs for its
off-policy correction) and log-probs (`logprobs_from_logits`) on a tiny randomly initialised causal LM, one AdamW
step: the advantage-weighted log-likelihood of the sampled ids rises.

SkyRL's own model and workers are not driven: `skyrl.backends.skyrl_train.workers.model_wrapper` (the
`HFModelWrapper` its FSDP and Megatron policy workers train) imports `flash_attn.bert_padding` unconditionally, and
flash-attn has no CPU build (it compiles CUDA kernels from source); the workers also run as Ray actors under
torch.distributed, and `RayPPOTrainer.convert_to_training_input` pads by the workers' data-parallel size. So the
model and optimiser here are plain torch, wired as SkyRL's worker wires them (left-padded sequences, position ids
from the attention mask, log-probs of the last `response_length` ids)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from skyrl.backends.skyrl_train.utils.ppo_utils import (
    AdvantageEstimator,
    PolicyLossRegistry,
    compute_advantages_and_returns,
)
from skyrl.backends.skyrl_train.utils.torch_utils import logprobs_from_logits
from skyrl.train.config.config import AlgorithmConfig
from skyrl.train.dataset.preprocess import convert_prompts_responses_to_batch_tensors
from skyrl.train.generators.utils import merge_stepwise_output
from transformers import LlamaConfig, LlamaForCausalLM

from .test_skyrl import generator_output

pytestmark = pytest.mark.trainers


def test_one_grpo_step_on_a_tiny_model_raises_the_advantage_weighted_log_likelihood() -> None:
    torch.manual_seed(0)
    merged = merge_stepwise_output(generator_output())
    sequences, attention, response_mask, rewards, loss_mask, rollout_logprobs, *_ = (
        convert_prompts_responses_to_batch_tensors(
            0, merged["prompt_token_ids"], merged["response_ids"], merged["rewards"], merged["loss_masks"],
            merged["rollout_logprobs"],
        )
    )  # fmt: skip
    config = AlgorithmConfig()
    uids = np.array([tid.instance_id for tid in merged["trajectory_ids"]])
    advantages, _ = compute_advantages_and_returns(
        token_level_rewards=rewards, response_mask=response_mask, index=uids,
        adv_estimator=AdvantageEstimator.GRPO, config=config,
    )  # fmt: skip
    assert advantages[0].max() > 0 > advantages[1].min(), "group g1: the 1.0 session above the 0.0 one"
    model = LlamaForCausalLM(LlamaConfig(vocab_size=1024, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=2))  # fmt: skip
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    position_ids = (attention.long().cumsum(-1) - 1).clamp(min=0)
    actions = response_mask.shape[1]

    def log_probs() -> torch.Tensor:
        logits = model(input_ids=sequences, attention_mask=attention, position_ids=position_ids).logits
        return logprobs_from_logits(logits[:, -actions - 1 : -1], sequences[:, -actions:])

    def objective() -> float:
        with torch.no_grad():
            return float((advantages * log_probs() * loss_mask).sum())

    before = objective()
    old = log_probs().detach()  # SkyRL's policy worker computes the old policy's log-probs before updating
    policy_loss = PolicyLossRegistry.get(config.policy_loss_type)
    loss, metrics = policy_loss(log_probs(), old, advantages, config=config, loss_mask=loss_mask,
                                rollout_logprobs=rollout_logprobs)  # fmt: skip
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    assert torch.isfinite(loss) and metrics["clip_ratio"] == 0.0
    assert objective() > before
