"""miles: one `Sample` per sample, as miles declares it (radixark/miles 0.1.0 at 31f1ca9, `miles.utils.types.Sample`).

`tokens` (prompt and response), `response_length`, `loss_mask` and `rollout_log_probs` over the response only (the
last `response_length` ids, as miles' loss reads them), `reward`, `status` (the value of `Sample.Status`:
`completed`, `truncated`, `aborted`), `weight_versions` (every version the response was sampled under, in order)
and `metadata`: the sample's metadata, plus `metadata["tito"]` with what miles has no field for (spans, group id).
miles' `group_index` and `index` are integers its rollout manager assigns; tito's group id is a string, so it stays
in `metadata["tito"]`.

Imports nothing from tito but trajectory.codec, trajectory.exports.common and trajectory.samples.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tito.trajectory.codec import SampleDecodeError, span_to_json
from tito.trajectory.exports.common import TITO_KEY, JsonRecord, facts_in, prompt_length, rebuilt
from tito.trajectory.samples import Sample, merged_versions

NAME = "miles"
UPSTREAM = "miles 0.1.0 (radixark/miles@31f1ca9): miles.utils.types.Sample"
FIELDS = ("tokens", "response_length", "loss_mask", "rollout_log_probs", "reward", "status", "weight_versions",
          "metadata")  # fmt: skip
"""The miles Sample fields written; the rest keep miles' defaults."""


def export(samples: Sequence[Sample]) -> list[JsonRecord]:
    return [_miles_sample(sample) for sample in samples]


def _miles_sample(sample: Sample) -> JsonRecord:
    split = prompt_length(sample)
    tito = {
        "spans": [span_to_json(span) for span in sample.spans],
        "group_id": sample.group_id,
        "conversation": None if sample.conversation is None else dict(sample.conversation),
    }
    return {
        "tokens": sample.tokens.tolist(),
        "response_length": sample.response_length,
        "loss_mask": sample.loss_mask[split:].tolist(),
        "rollout_log_probs": sample.rollout_logprobs[split:].tolist(),
        "reward": sample.reward,
        "status": sample.status,
        "weight_versions": merged_versions(span.weight_versions for span in sample.spans),
        "metadata": {**sample.metadata, TITO_KEY: tito},
    }


def restore(records: Sequence[Mapping[str, Any]]) -> list[Sample]:
    samples = []
    for index, record in enumerate(records):
        metadata = dict(record["metadata"])
        tito = facts_in(metadata, f"miles sample {index}: metadata")
        del metadata[TITO_KEY]
        tokens = list(record["tokens"])
        split = len(tokens) - int(record["response_length"])
        if split < 0 or len(record["loss_mask"]) != record["response_length"]:
            raise SampleDecodeError(f"miles sample {index}: loss_mask does not cover the last response_length ids")
        facts = {**tito, "metadata": metadata, "reward": record["reward"], "status": record["status"],
                 "response_length": record["response_length"]}  # fmt: skip
        mask = [0] * split + list(record["loss_mask"])
        samples.append(rebuilt(facts, tokens, mask, [0.0] * split + list(record["rollout_log_probs"])))
    return samples
