"""The default picker, exactly-once training, and the contracts of picker and post-processor hooks.

The module-level hook functions below are loaded by import path (`tests.trajectory.test_picking:NAME`), here and
in test_tree.py, as a deployment's `--sample-picker` / `--sample-postprocessor` would be.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from tito.errors import ConfigurationError
from tito.trajectory.events import SessionConfig, TrajectoryKind
from tito.trajectory.picking import (
    SampleHookError,
    TreeView,
    drop_superseded_retries,
    load_hook,
    pick_leaves,
    postprocess,
    train_each_node_once,
)
from tito.trajectory.tree import TreeTrajectory

from .turns import assistant, tool, turn, user


def keep_first_leaf(tree: TreeView) -> list[int]:
    return list(tree.leaves[:1])


def invent_a_leaf(tree: TreeView) -> list[int]:
    return [*tree.leaves, 999]


def reverse(samples: list[Any], tree: TreeView) -> list[Any]:
    return samples[::-1]


async def async_picker(tree: TreeView) -> list[int]:
    return []


NOT_A_FUNCTION = 3
U1 = user("task")


def forest() -> TreeTrajectory:
    """Root 0 -> retried child 1 (superseded by 2); 2 continued to 4; a second root 3 that never continued."""
    t = TreeTrajectory(SessionConfig(trajectory=TrajectoryKind.TREE))
    turn(t, [U1], "a1")
    turn(t, [U1, assistant("a1"), tool("x")], "first try")
    turn(t, [U1, assistant("a1"), tool("x")], "second try")
    turn(t, [user("other opening")], "b1")
    turn(t, [U1, assistant("a1"), tool("x"), assistant("second try"), user("more")], "done")
    return t


def test_the_default_picker_drops_only_superseded_retries_and_keeps_another_opening() -> None:
    view = TreeView.of(forest().store)
    assert view.leaves == (1, 3, 4)
    assert drop_superseded_retries(view) == [3, 4]


def test_a_retry_that_was_retried_again_leaves_only_the_latest_try() -> None:
    t = TreeTrajectory(SessionConfig(trajectory=TrajectoryKind.TREE))
    turn(t, [U1], "a1")
    for attempt in range(3):
        turn(t, [U1, assistant("a1"), tool("x")], f"try {attempt}")
    assert drop_superseded_retries(TreeView.of(t.store)) == [3]


def test_a_leaf_is_superseded_only_by_a_later_answer_to_the_same_request() -> None:
    """Same parent but other request messages (another tool result, a re-asked question): no retry, kept. A
    generation is never dropped for being early or a branch (frameworks that resend differently lose nothing)."""
    t = TreeTrajectory(SessionConfig(trajectory=TrajectoryKind.TREE))
    turn(t, [U1], "a1")
    turn(t, [U1, assistant("a1"), tool("x")], "on x")  # node 1
    turn(t, [U1, assistant("a1"), tool("y")], "on y")  # node 2: same parent, another request
    turn(t, [U1, assistant("a1"), user("re-asked")], "re-asked")  # node 3
    assert drop_superseded_retries(TreeView.of(t.store)) == [1, 2, 3]
    turn(t, [U1, assistant("a1"), tool("x")], "on x again")  # node 4 answers node 1's request
    assert drop_superseded_retries(TreeView.of(t.store)) == [2, 3, 4]


def test_a_retried_opening_supersedes_the_root_it_repeats() -> None:
    t = TreeTrajectory(SessionConfig(trajectory=TrajectoryKind.TREE))
    turn(t, [U1], "a1")
    turn(t, [U1], "a1 again")
    turn(t, [U1], "with tools", tools=[{"type": "function", "function": {"name": "f"}}])  # another request
    assert drop_superseded_retries(TreeView.of(t.store)) == [1, 2]


def test_a_single_root_leaf_is_kept() -> None:
    t = TreeTrajectory(SessionConfig(trajectory=TrajectoryKind.TREE))
    turn(t, [U1], "a1")
    assert drop_superseded_retries(TreeView.of(t.store)) == [0]


def test_the_tree_view_gives_depths_children_and_paths() -> None:
    view = TreeView.of(forest().store)
    assert view.nodes[0].children == (1, 2) and view.nodes[4].depth == 2
    assert view.path(4) == [0, 2, 4] and view.nodes[3].parent_id is None


def test_a_node_shared_by_kept_leaves_is_trained_in_the_earliest_leaf_only() -> None:
    t = forest()
    later, earlier = t.store.path_sequence(4), t.store.path_sequence(1)  # passed out of commit order on purpose
    train_each_node_once([later, earlier])
    root_span = earlier.spans[0]
    assert all(earlier.loss_mask[root_span.start : root_span.end])
    assert not any(later.loss_mask[root_span.start : root_span.end])
    assert not any(later.logprobs[root_span.start : root_span.end])
    assert all(later.loss_mask[s.start : s.end] for s in later.spans[1:])


def test_masking_negative_control_disjoint_paths_are_untouched() -> None:
    t = forest()
    first, second = t.store.path_sequence(3), t.store.path_sequence(4)
    before = (first.loss_mask.tobytes(), second.loss_mask.tobytes())
    train_each_node_once([first, second])
    assert (first.loss_mask.tobytes(), second.loss_mask.tobytes()) == before


@pytest.mark.parametrize(
    ("picker", "problem"),
    [
        (invent_a_leaf, "returned 999 at position 3"),
        (lambda tree: [tree.leaves[0], tree.leaves[0]], "the same leaf id twice"),
        (lambda tree: 1 / 0, "raised ZeroDivisionError"),
        (lambda tree: 5, "must return a list"),
    ],
    ids=["unknown-leaf", "duplicate", "raises", "not-a-list"],
)
def test_a_picker_that_breaks_its_contract_is_a_422_naming_it(picker: Any, problem: str) -> None:
    with pytest.raises(SampleHookError, match=problem) as caught:
        pick_leaves(picker, TreeView.of(forest().store), "my.hooks:pick")
    assert caught.value.http_status == 422 and caught.value.hook == "my.hooks:pick"
    assert "my.hooks:pick" in str(caught.value)


def test_a_picker_may_reorder_and_drop() -> None:
    assert pick_leaves(lambda tree: [4, 1], TreeView.of(forest().store), "p") == [4, 1]


@pytest.mark.parametrize(
    ("postprocessor", "problem"),
    [
        (lambda samples, tree: [*samples, {"tokens": []}], "an object it was not given at position 2"),
        (lambda samples, tree: [samples[0], samples[0]], "the same sample twice"),
        (lambda samples, tree: samples.pop(7), "raised IndexError"),
    ],
    ids=["foreign-sample", "duplicate", "raises"],
)
def test_a_post_processor_that_breaks_its_contract_is_a_422_naming_it(postprocessor: Any, problem: str) -> None:
    samples = [{"tokens": [1]}, {"tokens": [1]}]
    with pytest.raises(SampleHookError, match=problem) as caught:
        postprocess(postprocessor, samples, TreeView.of(forest().store), "my.hooks:post")
    assert caught.value.http_status == 422 and "my.hooks:post" in str(caught.value)


def test_a_post_processor_is_checked_by_identity_not_equality() -> None:
    """An equal copy is not one of the given samples: the server's own assembly must not be replaced."""
    samples = [{"tokens": [1]}]
    with pytest.raises(SampleHookError):
        postprocess(lambda given, tree: [dict(given[0])], samples, TreeView.of(forest().store), "copying")
    kept: Sequence[Any] = postprocess(lambda given, tree: given, samples, TreeView.of(forest().store), "identity")
    assert kept[0] is samples[0]


def test_hooks_load_by_import_path() -> None:
    assert load_hook("tests.trajectory.test_picking:keep_first_leaf", "--sample-picker") is keep_first_leaf


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("tests.trajectory.test_picking.keep_first_leaf", "expected 'module:function'"),
        ("tests.no_such_module:pick", "cannot import module"),
        ("tests.trajectory.test_picking:missing", "has no attribute 'missing'"),
        ("tests.trajectory.test_picking:NOT_A_FUNCTION", "is a int, not a function"),
        ("tests.trajectory.test_picking:async_picker", "is async"),
    ],
    ids=["no-colon", "no-module", "no-attribute", "not-callable", "async"],
)
def test_a_hook_that_cannot_be_loaded_is_a_configuration_error_naming_the_option(path: str, problem: str) -> None:
    with pytest.raises(ConfigurationError, match=problem) as caught:
        load_hook(path, "--sample-picker")
    assert "--sample-picker" in str(caught.value)


def test_a_tree_session_with_a_bad_hook_path_fails_at_creation() -> None:
    with pytest.raises(ConfigurationError, match="--sample-postprocessor"):
        TreeTrajectory(SessionConfig(trajectory=TrajectoryKind.TREE, sample_postprocessor="nowhere:fn"))
