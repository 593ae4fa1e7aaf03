"""miles: each sample is a miles `Sample` (radixark/miles 0.1.0 at 31f1ca9, `miles/utils/types.py`).

miles imports torch and numpy at module level and is not on PyPI, so its dataclass is mirrored here with the
fields the projection writes and their types; building the mirror from the export (`Sample(**record)`) fails on a
misspelt or extra field.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from tito.trajectory.exports import miles

from .samples import all_samples, tree_samples


class Status(enum.Enum):
    PENDING = "pending"
    COMPLETED = "completed"
    TRUNCATED = "truncated"
    ABORTED = "aborted"
    FAILED = "failed"


@dataclass
class MilesSample:
    """The fields of miles.utils.types.Sample the projection fills (the rest keep their defaults)."""

    tokens: list[int] = field(default_factory=list)
    response_length: int = 0
    reward: float | dict[str, Any] | None = None
    loss_mask: list[int] | None = None
    weight_versions: list[str] = field(default_factory=list)
    rollout_log_probs: list[float] | None = None
    status: str = "pending"
    metadata: dict[str, Any] = field(default_factory=dict)


def test_every_sample_builds_a_miles_sample_with_response_only_mask_and_logprobs() -> None:
    samples = all_samples()
    for sample, exported in zip(samples, miles.export(samples), strict=True):
        built = MilesSample(**exported)
        assert Status(built.status).value == sample.status
        assert built.tokens == sample.tokens.tolist() and built.response_length == sample.response_length
        assert built.loss_mask == sample.loss_mask.tolist()[-sample.response_length :]
        assert built.rollout_log_probs == sample.rollout_logprobs.tolist()[-sample.response_length :]
        assert built.reward == sample.reward
        assert {k: v for k, v in built.metadata.items() if k != "tito"} == dict(sample.metadata)


def test_weight_versions_are_every_version_the_sample_was_sampled_under_in_order() -> None:
    first_leaf = miles.export(tree_samples())[0]
    assert first_leaf["weight_versions"] == ["w1", "w2"]
    assert first_leaf["metadata"]["tito"]["group_id"] == "prompt-3"
