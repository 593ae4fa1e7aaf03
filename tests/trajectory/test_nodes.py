"""The node store's index from response id to node: what a dialect's round-trip value (a signed block, a
`previous_response_id`) is looked up by, once per value, without scanning every node."""

from __future__ import annotations

from tito.trajectory.events import SessionConfig, TrajectoryKind
from tito.trajectory.tree import TreeTrajectory

from .turns import assistant, turn, user


def test_every_committed_turn_is_found_by_its_response_id_and_a_dropped_one_is_not() -> None:
    trajectory = TreeTrajectory(SessionConfig(trajectory=TrajectoryKind.TREE))
    first = turn(trajectory, [user("q")], "a1")
    second = turn(trajectory, [user("q"), assistant("a1"), user("more")], "a2")
    store = trajectory.store
    assert [store.by_response_id(t.response_id) for t in (first, second)] == [store.get(0), store.get(1)]
    assert store.by_response_id("chatcmpl-never") is None
    store.remove_subtree(0)
    assert store.by_response_id(first.response_id) is None and store.by_response_id(second.response_id) is None
