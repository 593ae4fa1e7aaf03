"""verifiers: each turn's appended messages then its reply become message nodes whose ids tile the sample; an
unscored sample says so as verifiers does (verifiers' own types check the records: trainers/test_verifiers.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tito.trajectory.codec import SampleDecodeError
from tito.trajectory.exports import verifiers

from .rollouts import rollout
from .samples import linear_samples


def test_nodes_are_the_messages_then_the_reply_of_each_turn_and_their_ids_tile_the_sample() -> None:
    sample = rollout()[1]
    (trace,) = verifiers.export([sample])
    nodes = trace["nodes"]
    assert [node["message"]["role"] for node in nodes] == ["system", "user", "assistant", "tool", "assistant"]
    assert [node["parent"] for node in nodes] == [None, 0, 1, 2, 3]
    assert [node["sampled"] for node in nodes] == [False, False, True, False, True]
    assert nodes[0]["token_ids"] == [], "a turn's appended ids go on its last appended message"
    assert [i for node in nodes for i in node["token_ids"]] == sample.tokens.tolist()
    assert [m for node in nodes for m in node["mask"]] == [bool(m) for m in sample.loss_mask]
    assert [call["node"] for call in trace["calls"]] == [2, 4]
    assert trace["rewards"] == {"reward": {"score": 0.0, "weight": 1.0}} and trace["task"]["key"] == "g1"


def test_an_unscored_sample_has_a_null_reward_and_an_unknown_role_is_refused() -> None:
    traces = verifiers.export(linear_samples())
    assert all(trace["rewards"] == {"reward": None} for trace in traces)
    with pytest.raises(SampleDecodeError, match="role 'function'"):
        verifiers.verifiers_message({"role": "function", "content": "x"})


def test_a_turn_that_appended_no_messages_puts_its_ids_before_its_reply() -> None:
    sample = rollout()[1]
    spans = (sample.spans[0], replace(sample.spans[1], messages=()))
    (trace,) = verifiers.export([replace(sample, spans=spans)])
    reply = trace["nodes"][-1]
    assert [node["message"]["role"] for node in trace["nodes"]] == ["system", "user", "assistant", "assistant"]
    assert reply["token_ids"] == sample.tokens[spans[1].prompt_start : spans[1].end].tolist()
    assert reply["mask"] == [bool(m) for m in sample.loss_mask[spans[1].prompt_start : spans[1].end]]
    assert len(reply["logprobs"]) == sum(reply["mask"]) and reply["parent"] == 2
