"""NeMo Gym: each turn's reply becomes Responses items, the last carrying its ids; tool results are
function_call_output items (NeMo Gym's own types check the records: trainers/test_nemo_gym.py)."""

from __future__ import annotations

import pytest

from tito.trajectory.exports import nemo_gym
from tito.trajectory.samples import SampleAssemblyError

from .rollouts import rollout
from .samples import linear_samples


def test_items_follow_the_conversation_and_only_each_replys_last_item_carries_ids() -> None:
    sample = rollout()[1]
    (record,) = nemo_gym.export([sample])
    output = record["response"]["output"]
    assert [item["type"] for item in output] == ["message", "function_call_output", "message"]
    assert [("generation_token_ids" in item) for item in output] == [True, False, True]
    assert output[1] == {"type": "function_call_output", "call_id": "call_1", "output": "result 0"}
    assert record["reward"] == 0.0 and record["response"]["id"] == sample.spans[-1].response_id


def test_a_sample_without_a_reward_is_refused() -> None:
    with pytest.raises(SampleAssemblyError, match="no reward"):
        nemo_gym.export(linear_samples())
