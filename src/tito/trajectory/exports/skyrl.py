"""SkyRL: a step-wise `GeneratorOutput` (skyrl 0.3.0, `skyrl.train.generators.base.GeneratorOutput`).

Each turn of a sample is one step, cut at the spans as SkyRL's step-wise generator cuts its own trajectories: the
step's `prompt_token_ids` are every id before the turn's sampled ids, its `response_ids` the sampled ids plus the
observation ids that follow (up to the next turn's sampled ids), `loss_masks` and `rollout_logprobs` over them.
`rewards` are per token: the step's reward on its last sampled id, 0.0 elsewhere (the reward posted for the turn's
response id; on the last step, else the sample's reward). `stop_reasons` are the turns' finish reasons,
`is_last_step` marks each sample's last turn, and `trajectory_ids` are `TrajectoryID`s as JSON:
`{"instance_id": group id (else session id), "repetition_id": the sample's rank among the group's samples here}`.
Fields without a tito counterpart are null (rollout_metrics, generation times, expert indices) or empty
(`env_metrics`: `{}` per step). `tito` holds each sample's other facts, one per sample (not per step): a key
GeneratorOutput does not declare, which SkyRL's trainer never reads.

Imports nothing from tito but trajectory.codec, trajectory.exports.common and trajectory.samples.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tito.trajectory.codec import SampleDecodeError, sample_facts
from tito.trajectory.exports.common import TITO_KEY, JsonRecord, rebuilt
from tito.trajectory.samples import Sample

NAME = "skyrl"
UPSTREAM = "skyrl 0.3.0: skyrl.train.generators.base.GeneratorOutput (step-wise, is_last_step)"
FIELDS = ("prompt_token_ids", "response_ids", "rewards", "loss_masks", "stop_reasons", "rollout_metrics",
          "rollout_logprobs", "trajectory_ids", "trajectory_generation_times", "trajectory_time_splits",
          "rollout_expert_indices", "is_last_step", "env_metrics")  # fmt: skip
"""The GeneratorOutput keys written (its vision-only pixel_values and image_grid_thw are left out, as SkyRL does
for text)."""
_PER_STEP = ("prompt_token_ids", "response_ids", "rewards", "loss_masks", "stop_reasons", "rollout_logprobs",
             "trajectory_ids", "is_last_step", "env_metrics")  # fmt: skip


def export(samples: Sequence[Sample]) -> JsonRecord:
    output: JsonRecord = {key: None for key in FIELDS}
    output.update({key: [] for key in _PER_STEP})
    repetitions: dict[str, int] = {}
    for sample in samples:
        if not sample.spans:
            raise SampleDecodeError("a sample without spans (written before tito kept them) cannot be cut into steps")
        instance = sample.group_id or str(sample.metadata.get("session_id", ""))
        repetition = repetitions.get(instance, 0)
        repetitions[instance] = repetition + 1
        trajectory_id = {"instance_id": instance, "repetition_id": repetition}
        for index, span in enumerate(sample.spans):
            is_last = index == len(sample.spans) - 1
            end = len(sample.tokens) if is_last else sample.spans[index + 1].start
            reward = span.reward if span.reward is not None or not is_last else sample.reward
            rewards = [0.0] * (end - span.start)
            if rewards:
                rewards[max(span.end - span.start - 1, 0)] = reward or 0.0
            output["prompt_token_ids"].append(sample.tokens[: span.start].tolist())
            output["response_ids"].append(sample.tokens[span.start : end].tolist())
            output["rewards"].append(rewards)
            output["loss_masks"].append(sample.loss_mask[span.start : end].tolist())
            output["stop_reasons"].append(span.finish_reason)
            output["rollout_logprobs"].append(sample.rollout_logprobs[span.start : end].tolist())
            output["trajectory_ids"].append(trajectory_id)
            output["is_last_step"].append(is_last)
            output["env_metrics"].append({})
    output[TITO_KEY] = [sample_facts(sample) for sample in samples]
    return output


def restore(output: Mapping[str, Any]) -> list[Sample]:
    facts = output.get(TITO_KEY)
    if not isinstance(facts, list):
        raise SampleDecodeError(f"a SkyRL GeneratorOutput without a {TITO_KEY!r} list was not written by tito")
    samples: list[Sample] = []
    steps: list[int] = []
    for row, is_last in enumerate(output["is_last_step"]):
        steps.append(row)
        if not is_last:
            continue
        if len(samples) == len(facts):
            raise SampleDecodeError(f"step {row} ends a trajectory beyond the {len(facts)} samples in {TITO_KEY!r}")
        prompt = output["prompt_token_ids"][steps[0]]
        last = steps[-1]
        mask = [0] * len(prompt) + [m for step in steps for m in output["loss_masks"][step]]
        logprobs = [0.0] * len(prompt) + [lp for step in steps for lp in output["rollout_logprobs"][step]]
        tokens = output["prompt_token_ids"][last] + output["response_ids"][last]
        samples.append(rebuilt(facts[len(samples)], tokens, mask, logprobs))
        steps = []
    if steps or len(samples) != len(facts):
        raise SampleDecodeError(f"the steps make {len(samples)} trajectories, {TITO_KEY!r} has {len(facts)}")
    return samples
