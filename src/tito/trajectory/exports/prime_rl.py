"""prime-rl: one `TrainingSample` per sample (prime-rl 0.8.0, `prime_rl.transports.rollouts.types.TrainingSample`).

A flat sequence, no prompt/completion split: `token_ids`, `mask` (booleans: trainable, i.e. sampled, ids),
`logprobs` and `temperatures`, all as long as `token_ids`. A token's temperature is the one the turn it belongs to
sampled with (a turn owns its prompt ids and its sampled ids), 1.0 where the turn recorded none (the engines'
default); prime-rl's orchestrator itself writes one temperature for the whole sequence. `env_name` is the agent's
metadata `env_name`, else `tito`. Optional fields (ref_logprobs, advantages, weights, multi-modal ones) are left
out, as prime-rl's `omit_defaults` does; advantages come from prime-rl's own grouping. `tito` holds the sample's
other facts (reward, spans, status, group id, metadata): prime-rl's type has no reward field.

Imports nothing from tito but trajectory.codec, trajectory.exports.common and trajectory.samples.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tito.trajectory.codec import sample_facts
from tito.trajectory.exports.common import TITO_KEY, JsonRecord, facts_in, rebuilt
from tito.trajectory.samples import Sample

NAME = "prime-rl"
UPSTREAM = "prime-rl 0.8.0: prime_rl.transports.rollouts.types.TrainingSample"
FIELDS = ("token_ids", "mask", "logprobs", "temperatures", "env_name")
"""The TrainingSample fields written (its required ones)."""
DEFAULT_TEMPERATURE = 1.0


def export(samples: Sequence[Sample]) -> list[JsonRecord]:
    return [_training_sample(sample) for sample in samples]


def token_temperatures(sample: Sample) -> list[float]:
    """Each token's sampling temperature: that of the turn whose prompt or reply holds it."""
    temperatures: list[float] = []
    for span in sample.spans:
        temperature = DEFAULT_TEMPERATURE if span.temperature is None else span.temperature
        temperatures += [temperature] * (span.end - len(temperatures))
    last = temperatures[-1] if temperatures else DEFAULT_TEMPERATURE
    return temperatures + [last] * (len(sample.tokens) - len(temperatures))


def _training_sample(sample: Sample) -> JsonRecord:
    env_name = sample.metadata.get("env_name")
    return {
        "token_ids": sample.tokens.tolist(),
        "mask": [bool(value) for value in sample.loss_mask],
        "logprobs": sample.rollout_logprobs.tolist(),
        "temperatures": token_temperatures(sample),
        "env_name": env_name if isinstance(env_name, str) else "tito",
        TITO_KEY: sample_facts(sample),
    }


def restore(records: Sequence[Mapping[str, Any]]) -> list[Sample]:
    return [
        rebuilt(facts_in(record, f"prime-rl sample {index}"), record["token_ids"], record["mask"], record["logprobs"])
        for index, record in enumerate(records)
    ]
