"""AReaL: integer versions per token and a reward are required; a sample that lacks either is refused, naming it
(AReaL's own concat checks the rest: trainers/test_areal.py)."""

from __future__ import annotations

import pytest

from tito.trajectory.exports import areal
from tito.trajectory.samples import SampleAssemblyError

from .rollouts import rollout
from .samples import linear_samples, tree_samples


def test_versions_are_the_turns_integer_versions_on_sampled_ids_and_minus_one_elsewhere() -> None:
    sample = rollout()[0]
    (record,) = areal.export([sample])
    versions = record["episode"]["versions"]
    for span, expected in zip(sample.spans, [3, 4, 3], strict=True):
        assert set(versions[span.start : span.end]) == {expected}
        assert set(versions[span.prompt_start : span.start]) == {-1}


def test_a_sample_without_a_reward_or_with_a_non_integer_version_is_refused() -> None:
    with pytest.raises(SampleAssemblyError, match="no reward"):
        areal.export(linear_samples())
    with pytest.raises(SampleAssemblyError, match="weight version 'w1', not an integer") as caught:
        areal.export(tree_samples())
    assert caught.value.http_status == 422
