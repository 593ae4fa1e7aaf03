"""Linear trajectory: extension, one-step retry derived from events, deep divergence refused, validation first."""

from __future__ import annotations

from array import array
from typing import Any

import pytest

from tito.errors import AppendOnlyError, TruncatedTurnError
from tito.trajectory import create_trajectory
from tito.trajectory.events import SessionConfig, TrajectoryKind, TurnCommitted
from tito.trajectory.linear import LinearTrajectory, SessionMovedOnError, ToolsChangedError
from tito.trajectory.shared_values import SHARED
from tito.trajectory.tree import TreeTrajectory

STOP = 99


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def commit(trajectory: LinearTrajectory, messages: list[dict[str, Any]], finish: str = "stop") -> TurnCommitted:
    """Plan, then commit a synthetic turn: appended ids [10 + i], sampled ids [node, STOP] (or cut by length)."""
    plan = trajectory.plan(messages, None, f"fp{len(messages)}", False)
    output = [50 + trajectory.store.next_node_id] + ([STOP] if finish == "stop" else [])
    event = TurnCommitted(
        "s", trajectory.store.next_node_id, plan.parent_id, len(plan.stored_ids),
        tuple(plan.appended), None, array("i", [10 + i for i in range(len(plan.appended))]), array("i", output),
        array("f", [-0.5] * len(output)), {"role": "assistant", "content": f"a{len(messages)}"}, finish,
        f"chatcmpl-{len(messages)}", f"fp{len(messages)}", {}, 0.0,
    )  # fmt: skip
    trajectory.check(plan)
    trajectory.apply(event)
    return event


def grow(trajectory: LinearTrajectory, turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for index in range(turns):
        messages.append(user(f"u{index}"))
        event = commit(trajectory, messages)
        messages.append(dict(event.assistant))
    return messages


def test_an_extension_appends_and_path_ids_are_prompt_then_sampled() -> None:
    trajectory = LinearTrajectory(SessionConfig())
    grow(trajectory, 2)
    assert trajectory.path_ids(1).tolist() == [10, 50, STOP, 10, 51, STOP]
    assert trajectory.path_ids(1) == trajectory.store.path_ids(1)
    assert [turn.node_id for turn in trajectory.turns()] == [0, 1]


def test_a_linear_session_stores_each_id_once_in_its_nodes_and_joins_the_path_from_them() -> None:
    trajectory = LinearTrajectory(SessionConfig())
    messages = grow(trajectory, 5)
    retried = commit(trajectory, [*messages[:-1]])  # a one-step retry: the head leaves the path
    own = {id(array_) for node in trajectory.store for array_ in (node.turn.prompt_ids, node.turn.output_ids)}
    held = [value for value in vars(trajectory).values() if isinstance(value, array)]
    assert held == [], "a linear trajectory keeps no array of its own: the path's ids live in the nodes only"
    listed = [item for value in vars(trajectory).values() if isinstance(value, list) for item in value]
    assert all(id(item) in own for item in listed if isinstance(item, array)), "references to node arrays only"
    path = trajectory.path_ids(retried.node_id)
    assert path.tolist() == [10, 50, STOP, 10, 51, STOP, 10, 52, STOP, 10, 53, STOP, 10, 55, STOP]
    assert path == trajectory.store.path_ids(retried.node_id)
    assert id(path) not in own, "path ids are a new array, so a caller extending them changes no node"
    assert trajectory.describe()["tokens"] == len(path)


def test_a_retry_of_the_last_turn_replaces_it_and_replay_gives_the_same_path() -> None:
    trajectory = LinearTrajectory(SessionConfig())
    first = commit(trajectory, [user("u0")])
    messages = [user("u0"), dict(first.assistant)]
    second = commit(trajectory, [*messages, user("u1")])
    retried = commit(trajectory, [*messages, user("u1 changed")])
    assert retried.parent_id == 0
    assert [turn.node_id for turn in trajectory.turns()] == [0, 2]
    assert 1 not in trajectory.store
    replayed = LinearTrajectory(SessionConfig())
    for event in (first, second, retried):  # no rollback event: the retry is read from its parent
        replayed.apply(event)
    assert replayed.messages() == trajectory.messages()
    assert replayed.path_ids(2) == trajectory.path_ids(2)
    assert replayed.sample_sequences()[0].loss_mask == trajectory.sample_sequences()[0].loss_mask


def test_dropping_the_last_reply_of_a_one_turn_session_starts_over() -> None:
    trajectory = LinearTrajectory(SessionConfig())
    messages = grow(trajectory, 1)
    plan = trajectory.plan(messages[:1], None, "again", False)
    assert plan.parent_id is None and plan.replaces == 0 and list(plan.appended) == messages[:1]


def test_deep_divergence_is_refused_naming_the_message_and_changes_nothing() -> None:
    trajectory = LinearTrajectory(SessionConfig())
    messages = grow(trajectory, 3)
    before = (trajectory.messages(), trajectory.path_ids(2), trajectory.version)
    with pytest.raises(AppendOnlyError, match=r"message 2 differs.*'content'.*discard 2"):
        trajectory.plan([*messages[:2], user("rewritten"), *messages[3:]], None, "x", False)
    with pytest.raises(AppendOnlyError, match="message 2"):
        trajectory.plan(messages[:2], None, "x", False)
    assert (trajectory.messages(), trajectory.path_ids(2), trajectory.version) == before


def test_a_shorter_request_that_also_changes_a_message_names_the_changed_one_not_the_missing_ones() -> None:
    trajectory = LinearTrajectory(SessionConfig())
    messages = grow(trajectory, 3)
    with pytest.raises(AppendOnlyError, match=r"message 0 differs.*'content': stored 'u0', got 'rewritten'") as error:
        trajectory.plan([user("rewritten"), messages[1], user("next")], None, "x", False)
    assert error.value.index == 0


def test_a_turn_cut_by_length_cannot_be_extended_but_can_be_retried() -> None:
    trajectory = LinearTrajectory(SessionConfig())
    messages = [user("u0")]
    cut = commit(trajectory, messages, finish="length")
    with pytest.raises(TruncatedTurnError, match="cut by the length limit"):
        trajectory.plan([*messages, dict(cut.assistant), user("more")], None, "x", False)
    assert trajectory.plan(messages, None, "x", False).replaces == 0


def test_an_sdk_retry_of_the_committed_request_gets_that_turn_back() -> None:
    trajectory = LinearTrajectory(SessionConfig())
    grow(trajectory, 1)
    plan = trajectory.plan([user("u0")], None, "fp1", True)
    assert plan.idempotent_reply is trajectory.store.get(0).turn
    assert trajectory.plan([user("u0")], None, "fp1", False).idempotent_reply is None


def test_a_stale_plan_fails_the_check() -> None:
    trajectory = LinearTrajectory(SessionConfig())
    stale = trajectory.plan([user("x")], None, "a", False)
    commit(trajectory, [user("y")])
    with pytest.raises(SessionMovedOnError, match="not recorded"):
        trajectory.check(stale)


def test_create_trajectory_builds_the_kind_the_config_asks_for() -> None:
    assert isinstance(create_trajectory(SessionConfig()), LinearTrajectory)
    assert isinstance(create_trajectory(SessionConfig(trajectory=TrajectoryKind.TREE)), TreeTrajectory)


def test_a_linear_session_returns_its_samples_unchanged() -> None:
    trajectory = LinearTrajectory(SessionConfig())
    samples = [object()]
    assert trajectory.postprocess_samples(samples) == samples


def test_later_turns_must_send_the_first_turns_tools_but_a_fresh_start_may_change_them() -> None:
    tools = [{"type": "function", "function": {"name": "search", "parameters": {}}}]
    trajectory = LinearTrajectory(SessionConfig())
    messages = grow(trajectory, 1)
    with pytest.raises(ToolsChangedError, match=r"first turn rendered \(none\)"):
        trajectory.plan([*messages, user("u1")], tools, "x", False)
    assert trajectory.plan(messages[:1], tools, "x", False).parent_id is None  # retrying the first turn: a new start


def test_a_rewritten_generated_reply_is_refused_not_taken_as_a_retry() -> None:
    trajectory = LinearTrajectory(SessionConfig())
    messages = grow(trajectory, 1)
    rewritten = {**messages[1], "content": "not what the model said"}
    with pytest.raises(AppendOnlyError, match=r"message 1 differs.*'content'.*send it back exactly as received"):
        trajectory.plan([messages[0], rewritten, user("next")], None, "x", False)
    with pytest.raises(AppendOnlyError, match="message 1"):
        trajectory.plan([messages[0], rewritten], None, "x", False)
    assert trajectory.plan([messages[0], user("changed")], None, "x", False).replaces == 0  # a retry drops it


def test_tools_are_checked_against_the_first_turn_whatever_object_holds_them() -> None:
    """The first turn's tools as a turn stores them (held), the request's list found by identity or compared."""
    tools = [{"type": "function", "function": {"name": "search", "parameters": {"default": 1}}}]
    trajectory = LinearTrajectory(SessionConfig())
    plan = trajectory.plan([user("u0")], tools, "fp0", False)
    event = TurnCommitted(
        "s", 0, None, 0, tuple(plan.appended), SHARED.held_tuple(tools), array("i", [10]), array("i", [50, STOP]),
        array("f", [-0.5, -0.5]), {"role": "assistant", "content": "a"}, "stop", "chatcmpl-0", "fp0", {}, 0.0,
    )  # fmt: skip
    trajectory.apply(event)
    messages = [user("u0"), event.assistant, user("u1")]
    as_float = [{"type": "function", "function": {"name": "search", "parameters": {"default": 1.0}}}]
    for same in (tools, [dict(tool) for tool in tools], as_float):  # the same list, an equal one, 1 == 1.0
        assert trajectory.plan(messages, same, "fp1", False).parent_id == 0
    tools.append({"type": "function", "function": {"name": "edit", "parameters": {}}})
    with pytest.raises(ToolsChangedError, match=r"first turn rendered \(search\)"):
        trajectory.plan(messages, tools, "fp1", False)


def test_resent_objects_known_equal_are_forgotten_past_a_retry_and_other_objects_still_compared() -> None:
    """A request's messages found equal to the stored ones are compared by identity on later turns; a retry drops
    those past its start, and a different object at a known index is compared as always."""
    trajectory = LinearTrajectory(SessionConfig())
    messages = grow(trajectory, 2)  # the replies resent as copies, as a client's JSON gives them
    assert trajectory.plan([*messages, user("u2")], None, "x", False).replaces is None
    rewritten = [messages[0], {"role": "assistant", "content": "not a1"}, *messages[2:], user("u2")]
    with pytest.raises(AppendOnlyError, match="message 1 differs"):
        trajectory.plan(rewritten, None, "x", False)
    retried = commit(trajectory, [*messages[:2], user("u1 again")])
    plan = trajectory.plan([*messages, user("u2")], None, "y", False)
    assert plan.replaces == retried.node_id, "the replaced turn's messages no longer extend the path"
