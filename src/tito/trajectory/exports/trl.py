"""TRL: the dict a `GRPOTrainer` `rollout_func` returns (TRL 1.16.0, `trl.trainer.grpo_trainer.RolloutFunc`).

Columns, one entry per sample: `prompt_ids` (the ids before the first sampled id), `completion_ids` (the rest:
sampled ids and the observations between turns), `logprobs` (rollout logprobs over the completion, 0.0 on
observation ids), `env_mask` (the loss mask over the completion: TRL trains only where it is 1, the multi-turn
"environment feedback" mask). TRL forwards every other column to the reward functions as keyword arguments:
`reward` (the sample's reward, for a reward function that returns it) and `tito` (the sample's other facts).

    trainer = GRPOTrainer(..., reward_funcs=lambda reward, **_: reward, rollout_func=lambda prompts, trainer: ...)

Imports nothing from tito but trajectory.codec, trajectory.exports.common and trajectory.samples.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tito.trajectory.codec import SampleDecodeError, sample_facts
from tito.trajectory.exports.common import TITO_KEY, JsonRecord, prompt_length, rebuilt
from tito.trajectory.samples import Sample

NAME = "trl"
UPSTREAM = "TRL 1.16.0: the GRPOTrainer rollout_func result (prompt_ids, completion_ids, logprobs, env_mask)"
REQUIRED = ("prompt_ids", "completion_ids", "logprobs")
"""The keys GRPOTrainer requires of a rollout_func result."""


def export(samples: Sequence[Sample]) -> JsonRecord:
    columns: JsonRecord = {key: [] for key in (*REQUIRED, "env_mask", "reward", TITO_KEY)}
    for sample in samples:
        split = prompt_length(sample)
        columns["prompt_ids"].append(sample.tokens[:split].tolist())
        columns["completion_ids"].append(sample.tokens[split:].tolist())
        columns["logprobs"].append(sample.rollout_logprobs[split:].tolist())
        columns["env_mask"].append(sample.loss_mask[split:].tolist())
        columns["reward"].append(sample.reward)
        columns[TITO_KEY].append(sample_facts(sample))
    return columns


def restore(columns: Mapping[str, Any]) -> list[Sample]:
    if TITO_KEY not in columns:
        raise SampleDecodeError(f"a TRL rollout without a {TITO_KEY!r} column was not written by tito's export")
    rows = zip(
        columns["prompt_ids"], columns["completion_ids"], columns["logprobs"], columns["env_mask"],
        columns["reward"], columns[TITO_KEY], strict=True,
    )  # fmt: skip
    return [
        rebuilt({**facts, "reward": reward}, [*prompt, *completion], [0] * len(prompt) + list(mask),
                [0.0] * len(prompt) + list(logprobs))
        for prompt, completion, logprobs, mask, reward, facts in rows
    ]  # fmt: skip
