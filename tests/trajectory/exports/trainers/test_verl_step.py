"""A real optimisation step from tito's export through verl's own API, on CPU: the export batched by verl's agent
loop worker (`DataProto`), GRPO advantages from verl, verl's PPO policy loss (`compute_policy_loss_vanilla`, with
verl's `ActorConfig`) on a tiny randomly initialised causal LM, one AdamW step. The policy's objective (the
advantage-weighted log-likelihood of the sampled ids) rises. verl's own actor workers (FSDP or Megatron engines
under Ray and torch.distributed) are not driven here: the loss and the batch are verl's, the model and the
optimiser plain torch, as verl's actor wires them."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM
from verl.trainer.ppo.core_algos import AdvantageEstimator, compute_policy_loss_vanilla
from verl.trainer.ppo.ray_trainer import compute_advantage
from verl.utils.torch_functional import logprobs_from_logits
from verl.workers.config import ActorConfig

from ..rollouts import BUDGETS, rollout
from .test_verl import to_data_proto

pytestmark = pytest.mark.trainers


def test_one_grpo_step_on_a_tiny_model_raises_the_advantage_weighted_log_likelihood() -> None:
    torch.manual_seed(0)
    batch = to_data_proto(rollout(BUDGETS), BUDGETS.prompt_length, BUDGETS.response_length)
    batch.batch["token_level_rewards"] = batch.batch["rm_scores"]
    batch = compute_advantage(batch, adv_estimator=AdvantageEstimator.GRPO)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=1024, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=2))  # fmt: skip
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    config = ActorConfig(strategy="fsdp", rollout_n=2, ppo_mini_batch_size=3, ppo_micro_batch_size_per_gpu=3)
    responses, mask, advantages = (batch.batch[key] for key in ("responses", "response_mask", "advantages"))

    def log_probs() -> torch.Tensor:
        logits = model(input_ids=batch.batch["input_ids"], attention_mask=batch.batch["attention_mask"],
                       position_ids=batch.batch["position_ids"]).logits  # fmt: skip
        return logprobs_from_logits(logits[:, -responses.shape[1] - 1 : -1], responses)

    def objective() -> float:
        with torch.no_grad():
            return float((advantages * log_probs() * mask).sum())

    before = objective()
    old = log_probs().detach()  # verl recomputes the old policy's log-probs with the actor before updating
    loss, metrics = compute_policy_loss_vanilla(old, log_probs(), advantages, mask, config=config)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    assert torch.isfinite(loss) and metrics["actor/ppo_kl"] == pytest.approx(0.0, abs=1e-6)
    assert objective() > before
