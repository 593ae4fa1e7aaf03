"""AReaL: the episode an AReaL `RolloutWorkflow.arun_episode` returns (areal 1.0.4, `areal.workflow.multi_turn`).

One record per sample: `episode` holds AReaL's keys as lists, one entry per token, built into tensors with a batch
dimension of 1 as AReaL's workflows build them: `input_ids` (int32; prompt and every turn), `loss_mask` (int32: 1
on sampled ids), `logprobs` (float32: the rollout logprobs, 0.0 elsewhere), `versions` (int32: the weight version
each sampled id was drawn under, -1 on prompt and observation ids, as AReaL writes), `attention_mask` (bool, all
ones) and `rewards` (float32, the sample's one reward: AReaL needs one, so a sample without a reward is refused).
A token's version is the last one the engine reported for its turn, as an integer (AReaL counts versions; a
version that is not an integer is refused, naming it). AReaL's `concat_padded_tensors` pads and joins the episodes
of a group; every key of an episode is batched, so tito's other facts sit beside it, in `tito`.

    episode = {key: torch.tensor([value], dtype=DTYPES[key]) for key, value in record["episode"].items()}

Imports nothing from tito but trajectory.codec, trajectory.exports.common and trajectory.samples.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tito.trajectory.codec import SampleDecodeError, sample_facts
from tito.trajectory.exports.common import TITO_KEY, JsonRecord, facts_in, rebuilt
from tito.trajectory.samples import Sample, SampleAssemblyError

NAME = "areal"
UPSTREAM = "areal 1.0.4: the arun_episode tensor dict (areal.workflow.multi_turn), joined by concat_padded_tensors"
DTYPES = {"input_ids": "int32", "loss_mask": "int32", "logprobs": "float32", "versions": "int32",
          "attention_mask": "bool", "rewards": "float32"}  # fmt: skip
"""The torch dtype of each episode key, as AReaL's workflows build them."""
NO_VERSION = -1


def export(samples: Sequence[Sample]) -> list[JsonRecord]:
    return [_record(sample) for sample in samples]


def token_versions(sample: Sample) -> list[int]:
    """Each token's weight version: its turn's last reported one on sampled ids, NO_VERSION elsewhere."""
    versions = [NO_VERSION] * len(sample.tokens)
    for span in sample.spans:
        if span.weight_version is None:
            continue
        try:
            version = int(span.weight_version)
        except ValueError:
            raise SampleAssemblyError(
                f"areal: turn {span.response_id} was sampled under weight version {span.weight_version!r}, not an "
                f"integer; AReaL counts versions (have the engine report integer versions)"
            ) from None
        versions[span.start : span.end] = [version] * (span.end - span.start)
    return versions


def _record(sample: Sample) -> JsonRecord:
    if sample.reward is None:
        session = sample.metadata.get("session_id")
        raise SampleAssemblyError(f"areal: session {session}'s sample has no reward; post `reward` or `rewards`")
    episode = {
        "input_ids": sample.tokens.tolist(),
        "loss_mask": sample.loss_mask.tolist(),
        "logprobs": sample.rollout_logprobs.tolist(),
        "versions": token_versions(sample),
        "attention_mask": [True] * len(sample.tokens),
        "rewards": sample.reward,
    }
    return {"episode": episode, TITO_KEY: sample_facts(sample)}


def restore(records: Sequence[Mapping[str, Any]]) -> list[Sample]:
    samples = []
    for index, record in enumerate(records):
        episode = record.get("episode")
        if not isinstance(episode, Mapping):
            raise SampleDecodeError(f"AReaL record {index} has no `episode` object")
        facts = facts_in(record, f"AReaL record {index}")
        arrays = (episode["input_ids"], episode["loss_mask"], episode["logprobs"])
        samples.append(rebuilt({**facts, "reward": episode["rewards"]}, *arrays))
    return samples
