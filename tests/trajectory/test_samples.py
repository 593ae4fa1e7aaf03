"""Sample assembly: mask 1 only on sampled ids, logprobs 0 elsewhere, truncation only at turn boundaries."""

from __future__ import annotations

from array import array
from dataclasses import replace

import pytest

from tito.trajectory import create_trajectory
from tito.trajectory.events import SessionConfig, TurnCommitted
from tito.trajectory.nodes import NodeStore
from tito.trajectory.samples import SampleAssemblyError, UnknownResponseIdError, assemble_sample, session_samples


def turn(node_id: int, parent_id: int | None, kept: int, prompt: list[int], output: list[int], finish: str = "stop",
         ) -> TurnCommitted:  # fmt: skip
    return TurnCommitted(
        "s", node_id, parent_id, kept, (), None, array("i", prompt), array("i", output),
        array("f", [-0.25 * (i + 1) for i in range(len(output))]), {"role": "assistant"}, finish, "id", "fp",
        {"cached_tokens": node_id}, 0.0,
    )  # fmt: skip


@pytest.fixture
def two_turns() -> tuple[NodeStore, list[TurnCommitted]]:
    store = NodeStore()
    turns = [turn(0, None, 0, [1, 2, 3], [4, 5]), turn(1, 0, 5, [6, 7], [8, 9, 10], finish="length")]
    for t in turns:
        store.add(t)
    return store, turns


def test_mask_and_logprobs_follow_the_sampled_ids(two_turns: tuple[NodeStore, list[TurnCommitted]]) -> None:
    store, turns = two_turns
    sample = assemble_sample("s", store.path_sequence(1), turns, reward=1.0, metadata={"task": "t"})
    assert sample.tokens.tolist() == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    assert sample.loss_mask.tolist() == [0, 0, 0, 1, 1, 0, 0, 1, 1, 1]
    assert sample.rollout_logprobs.tolist() == [0, 0, 0, -0.25, -0.5, 0, 0, -0.25, -0.5, -0.75]
    assert sample.response_length == 7
    assert sample.status == "truncated"  # the last turn was cut by length
    assert sample.reward == 1.0 and sample.metadata["task"] == "t"
    assert [t["cached_tokens"] for t in sample.metadata["turns"]] == [0, 1]


def test_max_seq_len_keeps_whole_turns_only(two_turns: tuple[NodeStore, list[TurnCommitted]]) -> None:
    store, turns = two_turns
    sample = assemble_sample("s", store.path_sequence(1), turns, max_seq_len=9)
    assert sample.tokens.tolist() == [1, 2, 3, 4, 5]
    assert sample.status == "truncated" and sample.metadata["truncated_turns"] == 1
    with pytest.raises(SampleAssemblyError, match="max_seq_len=4"):
        assemble_sample("s", store.path_sequence(1), turns, max_seq_len=4)


def test_client_metadata_never_overrides_server_owned_keys(two_turns: tuple[NodeStore, list[TurnCommitted]]) -> None:
    store, turns = two_turns
    sample = assemble_sample("s", store.path_sequence(0), turns[:1], metadata={"turns": "mine", "session_id": "x"})
    assert sample.metadata["session_id"] == "s" and isinstance(sample.metadata["turns"], list)
    assert sample.status == "completed"


def test_a_junction_that_drops_a_stored_id_keeps_the_sequence_exact() -> None:
    store = NodeStore()
    turns = [turn(0, None, 0, [1, 2], [3, 4]), turn(1, 0, 3, [5], [6, 7])]  # turn 1 drops the stop id 4
    for t in turns:
        store.add(t)
    sample = assemble_sample("s", store.path_sequence(1), turns)
    assert sample.tokens.tolist() == [1, 2, 3, 5, 6, 7]
    assert sample.loss_mask.tolist() == [0, 0, 1, 0, 1, 1]


def test_spans_tile_the_sample_even_where_a_junction_dropped_a_stored_id() -> None:
    store = NodeStore()
    turns = [turn(0, None, 0, [1, 2], [3, 4]), turn(1, 0, 3, [5], [6, 7])]  # turn 1 drops the stop id 4
    for t in turns:
        store.add(t)
    sample = assemble_sample("s", store.path_sequence(1), turns)
    first, second = sample.spans
    assert (first.prompt_start, first.start, first.end) == (0, 2, 3)  # its sampled ids shortened to [3]
    assert (second.prompt_start, second.start, second.end) == (3, 4, 6)
    tokens = sample.tokens.tolist()
    assert tokens[first.start : first.end] == turns[0].output_ids.tolist()[: first.end - first.start]
    assert tokens[second.prompt_start : second.start] == [5] and tokens[second.start : second.end] == [6, 7]


def test_max_seq_len_gives_the_reward_of_the_last_turn_it_keeps(
    two_turns: tuple[NodeStore, list[TurnCommitted]],
) -> None:
    store, turns = two_turns
    first, second = (replace(t, response_id=f"r{i}") for i, t in enumerate(turns))
    rewards = {"r0": 0.5, "r1": 1.0}
    whole = assemble_sample("s", store.path_sequence(1), [first, second], rewards=rewards)
    cut = assemble_sample("s", store.path_sequence(1), [first, second], max_seq_len=9, rewards=rewards)
    assert (whole.reward, cut.reward) == (1.0, 0.5) and len(cut.spans) == 1


def test_rewards_for_a_response_id_of_no_turn_are_refused_naming_it() -> None:
    trajectory = create_trajectory(SessionConfig())
    trajectory.apply(turn(0, None, 0, [1], [2]))
    with pytest.raises(UnknownResponseIdError, match="'nobody'") as caught:
        session_samples("s", trajectory, rewards={"id": 1.0, "nobody": 0.0})
    assert caught.value.unknown == ("nobody",) and caught.value.http_status == 400
