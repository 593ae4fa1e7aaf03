"""What every trainer projection shares: the prompt/response split, and a sample rebuilt from a projection.

A projection carries the sample's per-token arrays in the trainer's own fields; whatever the trainer's type has no
field for (spans, status, group id, metadata, ...) rides in one `tito` entry (`sample_facts`), so every projection
round-trips back to the tito sample.

Imports nothing from tito but trajectory.codec and trajectory.samples.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from typing import Any

from tito.trajectory.codec import SampleDecodeError, sample_from_facts
from tito.trajectory.samples import Sample

TITO_KEY = "tito"
"""Where a projection keeps the facts its trainer's type has no field for."""

JsonRecord = dict[str, Any]


def prompt_length(sample: Sample) -> int:
    """Ids before the first sampled id: the trainer's prompt; the rest is its response."""
    return len(sample.tokens) - sample.response_length


def rebuilt(
    facts: Mapping[str, Any], tokens: Sequence[int], loss_mask: Sequence[int | bool], logprobs: Sequence[float]
) -> Sample:
    """A sample from a projection's full-length arrays and its `tito` facts; lengths must agree."""
    if not len(tokens) == len(loss_mask) == len(logprobs):
        raise SampleDecodeError(
            f"tokens ({len(tokens)}), loss mask ({len(loss_mask)}) and logprobs ({len(logprobs)}) differ in length"
        )
    return sample_from_facts(
        facts, array("i", tokens), array("b", [int(bool(m)) for m in loss_mask]), array("f", logprobs)
    )


def facts_in(record: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    """The `tito` facts a projection carries; a SampleDecodeError naming `where` when they are missing."""
    facts = record.get(TITO_KEY)
    if not isinstance(facts, Mapping):
        raise SampleDecodeError(f"{where} has no {TITO_KEY!r} object: it was not written by tito's export")
    return facts
