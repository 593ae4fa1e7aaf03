"""Every trainer projection is pure and round-trips through JSON back to the tito sample; unknown names are refused
naming the choices."""

from __future__ import annotations

import copy
import importlib

import orjson
import pytest

from tito.trajectory.exports import PROJECTIONS, UnknownFormatError, projection

from .rollouts import rollout
from .samples import all_samples

NEEDS_REWARD_AND_COUNTED_VERSIONS = ("areal", "nemo_gym")


@pytest.mark.parametrize("name", sorted(PROJECTIONS))
def test_each_projection_round_trips_through_json_to_the_same_samples(name: str) -> None:
    samples = [*rollout(), *(() if name in NEEDS_REWARD_AND_COUNTED_VERSIONS else all_samples())]
    chosen = projection(name)
    exported = orjson.loads(orjson.dumps(chosen.export(samples)))
    assert chosen.restore(exported) == samples

    untouched = copy.deepcopy(samples)
    first = chosen.export(samples)
    assert samples == untouched, "a projection does not change the samples it is given"
    assert chosen.export(copy.deepcopy(untouched)) == first, "a projection depends only on the samples' values"


UPSTREAM = {
    "verl": ("verl 0.9.1", "AgentLoopOutput"),
    "skyrl": ("skyrl 0.4.0", "GeneratorOutput"),
    "prime-rl": ("prime-rl 0.8.0", "TrainingSample"),
    "verifiers": ("verifiers 0.4.0", "Trace"),
    "trl": ("TRL 1.16.0", "rollout_func"),
    "miles": ("miles 0.1.0", "miles.utils.types.Sample"),
    "areal": ("areal 1.0.4", "concat_padded_tensors"),
    "nemo_gym": ("nemo-gym 0.4.0", "BaseVerifyResponse"),
}


@pytest.mark.parametrize("name", sorted(PROJECTIONS))
def test_each_projection_names_the_upstream_type_and_version_it_follows(name: str) -> None:
    version, upstream_type = UPSTREAM[name]
    module = importlib.import_module(f"tito.trajectory.exports.{name.replace('-', '_')}")
    for text in (PROJECTIONS[name].upstream, module.__doc__ or ""):
        assert version in text and upstream_type in text


def test_an_unknown_format_names_every_choice() -> None:
    with pytest.raises(
        UnknownFormatError, match="verl, skyrl, prime-rl, verifiers, trl, miles, areal, nemo_gym"
    ) as caught:
        projection("openrlhf", also=("json",))
    assert caught.value.http_status == 400 and "'openrlhf'" in str(caught.value) and "json" in str(caught.value)
