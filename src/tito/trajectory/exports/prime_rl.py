"""prime-rl: `TrainingSample`s in their wire form (prime-rl 0.8.0, `prime_rl.transports.rollouts.types`).

A `TrainingSample` is a msgspec struct with `array_like=True`: on the wire each is an array of its fields in
declaration order, never an object, so `training_samples` holds one array per sample: `[token_ids, mask, logprobs,
temperatures, env_name]` (a flat sequence, no prompt/completion split; `mask` booleans: sampled ids; a token's
temperature is the one the turn it belongs to sampled with, 1.0 where the turn recorded none; `env_name` the
agent's metadata `env_name`, else `tito`). Decode them with prime-rl's own type:

    samples = msgspec.json.decode(orjson.dumps(reply["samples"]["training_samples"]), type=list[TrainingSample])

The optional fields after `env_name` (ref_logprobs, multi-modal ones, loss weights, `advantages`) are left out,
as prime-rl's `omit_defaults` writes them. `TrainingSample` has no reward: prime-rl's orchestrator computes the
advantages from the rollout's reward and stamps them per token before its trainer reads a sample (a sample with
trainable ids and no advantages is refused there). So a run that goes through prime-rl's orchestrator takes the
`verifiers` format (a Trace, reward included), and one that feeds the trainer directly stamps `advantages` itself
from `rewards` here, one per sample. `tito` holds each sample's other facts, beside the samples (prime-rl's type
rejects any field it does not declare).

Imports nothing from tito but trajectory.codec, trajectory.exports.common and trajectory.samples.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tito.trajectory.codec import SampleDecodeError, sample_facts
from tito.trajectory.exports.common import TITO_KEY, JsonRecord, rebuilt
from tito.trajectory.samples import Sample

NAME = "prime-rl"
UPSTREAM = "prime-rl 0.8.0: prime_rl.transports.rollouts.types.TrainingSample (msgspec, array_like)"
DEFAULT_TEMPERATURE = 1.0


def export(samples: Sequence[Sample]) -> JsonRecord:
    return {
        "training_samples": [_training_sample(sample) for sample in samples],
        "rewards": [sample.reward for sample in samples],
        TITO_KEY: [sample_facts(sample) for sample in samples],
    }


def token_temperatures(sample: Sample) -> list[float]:
    """Each token's sampling temperature: that of the turn whose prompt or reply holds it."""
    temperatures: list[float] = []
    for span in sample.spans:
        temperature = DEFAULT_TEMPERATURE if span.temperature is None else span.temperature
        temperatures += [temperature] * (span.end - len(temperatures))
    last = temperatures[-1] if temperatures else DEFAULT_TEMPERATURE
    return temperatures + [last] * (len(sample.tokens) - len(temperatures))


def _training_sample(sample: Sample) -> list[Any]:
    env_name = sample.metadata.get("env_name")
    return [
        sample.tokens.tolist(),
        [bool(value) for value in sample.loss_mask],
        sample.rollout_logprobs.tolist(),
        token_temperatures(sample),
        env_name if isinstance(env_name, str) else "tito",
    ]


def restore(document: Mapping[str, Any]) -> list[Sample]:
    facts = document.get(TITO_KEY)
    if not isinstance(facts, list) or len(facts) != len(document["training_samples"]):
        raise SampleDecodeError(f"a prime-rl export without one {TITO_KEY!r} entry per sample was not written by tito")
    return [
        rebuilt({**fact, "reward": reward}, record[0], record[1], record[2])
        for record, reward, fact in zip(document["training_samples"], document["rewards"], facts, strict=True)
    ]
