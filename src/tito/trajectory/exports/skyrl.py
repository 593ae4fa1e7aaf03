"""SkyRL: a step-wise `GeneratorOutput` (skyrl 0.4.0, `skyrl.train.generators.base.GeneratorOutput`).

Each turn of a sample is one step, cut at the spans as SkyRL's step-wise generator cuts its own trajectories: the
step's `prompt_token_ids` are every id before the turn's sampled ids, its `response_ids` the sampled ids plus the
observation ids that follow (up to the next turn's sampled ids), `loss_masks` and `rollout_logprobs` over them, so
a step's prompt and response are the next step's prompt (SkyRL's `merge_stepwise_output` joins them back).
`rewards` are per token: the step's reward on its last sampled id, 0.0 elsewhere (the reward posted for the turn's
response id; on the last step, else the sample's reward). `stop_reasons` are the turns' finish reasons,
`is_last_step` marks each sample's last turn. `trajectory_ids` are SkyRL's `TrajectoryID` as JSON (build them with
`TrajectoryID(**entry)`): `instance_id` is the group id (else the session id), where SkyRL's GRPO groups;
`repetition_id` is a number derived from the session id and the sample's rank within its session, so sessions of
one group sampled in separate `/samples` calls never share an id. SkyRL slices every list key of the output per
step, so tito writes no key of its own: the sample's other facts ride in `env_metrics` (a per-step dict SkyRL
passes through untouched), `{"tito": facts}` on each sample's last step, `{}` on the others. Fields without a tito
counterpart are null (rollout_metrics, generation times, expert indices, sample support).

Imports nothing from tito but trajectory.codec, trajectory.exports.common and trajectory.samples.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from tito.trajectory.codec import SampleDecodeError, sample_facts
from tito.trajectory.exports.common import TITO_KEY, JsonRecord, facts_in, rebuilt
from tito.trajectory.samples import Sample

NAME = "skyrl"
UPSTREAM = "skyrl 0.4.0: skyrl.train.generators.base.GeneratorOutput (step-wise, is_last_step)"
_UNSET = ("rollout_metrics", "trajectory_generation_times", "trajectory_time_splits", "rollout_expert_indices",
          "rollout_sample_support")  # fmt: skip
_PER_STEP = ("prompt_token_ids", "response_ids", "rewards", "loss_masks", "stop_reasons", "rollout_logprobs",
             "trajectory_ids", "is_last_step", "env_metrics")  # fmt: skip


def repetition_id(session_id: str, rank: int) -> int:
    """A repetition number for the `rank`-th sample of a session: 48 bits of a digest of both, so it is the same in
    every call and every process (an export equals `/samples`) and two sessions of a group practically never meet."""
    digest = hashlib.blake2b(f"{session_id}/{rank}".encode(), digest_size=6).digest()
    return int.from_bytes(digest, "big")


def export(samples: Sequence[Sample]) -> JsonRecord:
    output: JsonRecord = {key: None for key in _UNSET}
    output.update({key: [] for key in _PER_STEP})
    ranks: dict[str, int] = {}
    for sample in samples:
        if not sample.spans:
            raise SampleDecodeError("a sample without spans (written before tito kept them) cannot be cut into steps")
        session_id = str(sample.metadata.get("session_id", ""))
        rank = ranks.get(session_id, 0)
        ranks[session_id] = rank + 1
        trajectory_id = {"instance_id": sample.group_id or session_id, "repetition_id": repetition_id(session_id, rank)}
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
            output["env_metrics"].append({TITO_KEY: sample_facts(sample)} if is_last else {})
    return output


def restore(output: Mapping[str, Any]) -> list[Sample]:
    samples: list[Sample] = []
    steps: list[int] = []
    for row, is_last in enumerate(output["is_last_step"]):
        steps.append(row)
        if not is_last:
            continue
        facts = facts_in(output["env_metrics"][row], f"SkyRL step {row} (a trajectory's last): env_metrics")
        prompt = output["prompt_token_ids"][steps[0]]
        last = steps[-1]
        mask = [0] * len(prompt) + [m for step in steps for m in output["loss_masks"][step]]
        logprobs = [0.0] * len(prompt) + [lp for step in steps for lp in output["rollout_logprobs"][step]]
        tokens = output["prompt_token_ids"][last] + output["response_ids"][last]
        samples.append(rebuilt(facts, tokens, mask, logprobs))
        steps = []
    if steps:
        raise SampleDecodeError(f"steps {steps[0]}..{steps[-1]} end no trajectory (no is_last_step after them)")
    return samples
