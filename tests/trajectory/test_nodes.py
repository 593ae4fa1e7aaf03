"""The node store: its index from response id to node (what a dialect's round-trip value, a signed block or a
`previous_response_id`, is looked up by, once per value, without scanning every node), and a path's ids joined from
the nodes that store them once."""

from __future__ import annotations

import random
from array import array

from tito.path_ids import IdParts, joined_ids
from tito.trajectory.events import SessionConfig, TrajectoryKind, TurnCommitted
from tito.trajectory.nodes import Node, extend_parts, path_parts
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


def _reference_path_ids(path: list[Node]) -> list[int]:
    """A path's ids as the definition states them: each node's kept parent ids, then its own."""
    ids: list[int] = []
    for node in path:
        del ids[node.turn.kept_parent_ids :]
        ids.extend(node.turn.prompt_ids)
        ids.extend(node.turn.output_ids)
    return ids


def test_a_paths_ids_joined_from_its_nodes_parts_equal_the_definition_whatever_the_junctions_drop() -> None:
    rng = random.Random(34)
    for _ in range(200):
        path: list[Node] = []
        parts: IdParts = []
        for index in range(rng.randint(1, 8)):
            length = path[-1].path_length if path else 0
            kept = max(0, length - rng.choice([0, 0, 1, 2, 5]))  # junctions drop a few ids
            prompt = array("i", rng.sample(range(1000), rng.randint(0, 3)))
            output = array("i", rng.sample(range(1000), rng.randint(1, 3)))
            event = TurnCommitted(
                "s", index, index - 1 if path else None, kept, (), None, prompt, output,
                array("f", bytes(4 * len(output))), {}, "stop", "", "", {}, 0.0,
            )  # fmt: skip
            node = Node(event, path_length=kept + len(prompt) + len(output))
            extend_parts(parts, length, node)
            path.append(node)
            expected = _reference_path_ids(path)
            assert joined_ids(parts).tolist() == expected, "kept in step with the tip, turn by turn"
            assert joined_ids(path_parts(path)).tolist() == expected, "rebuilt from the nodes"
            assert len(expected) == node.path_length
