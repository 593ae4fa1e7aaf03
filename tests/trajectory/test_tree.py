"""Tree sessions: where requests attach, what is refused, which leaves become samples, what GET shows.

Turns are synthetic (`tests.trajectory.turns`): no tokenizer or engine, so each test shows the tree logic alone.
"""

from __future__ import annotations

from array import array
from typing import Any

import pytest

from tito.errors import TruncatedTurnError
from tito.trajectory.events import SessionConfig, TrajectoryKind
from tito.trajectory.nodes import NodeStore
from tito.trajectory.picking import SampleHookError
from tito.trajectory.tree import (
    ConcurrentBranchError,
    StrictAppendOnlyError,
    TreeCapacityError,
    TreeTrajectory,
)

from .turns import assistant, commit_event, system, tool, turn, user


def tree(**options: object) -> TreeTrajectory:
    return TreeTrajectory(SessionConfig(trajectory=TrajectoryKind.TREE, **options))  # type: ignore[arg-type]


U1, T1, T1B, T2 = user("fix the bug"), tool("ls: a.py"), tool("ls: b.py"), tool("ok")


def three_turns(t: TreeTrajectory) -> None:
    """u1 -> a1 (node 0), t1 -> a2 (node 1), t2 -> a3 (node 2)."""
    turn(t, [U1], "a1")
    turn(t, [U1, assistant("a1"), T1], "a2")
    turn(t, [U1, assistant("a1"), T1, assistant("a2"), T2], "a3")


def test_an_extension_attaches_below_the_node_whose_path_it_resends() -> None:
    t = tree()
    three_turns(t)
    assert [(n.node_id, n.parent_id) for n in t.store] == [(0, None), (1, 0), (2, 1)]
    assert t.store.get(2).turn.request_messages == (T2,)


def test_the_plan_carries_the_parent_path_ids_and_messages_verbatim() -> None:
    t = tree()
    three_turns(t)
    messages = [U1, assistant("a1"), T1, assistant("a2"), T2, assistant("a3"), user("thanks")]
    plan = t.plan(messages, None, "f", False)
    assert plan.parent_id == 2
    assert plan.stored_ids == t.path_ids(2)
    assert plan.stored_messages == messages[:6]
    assert list(plan.appended) == [user("thanks")]
    assert plan.version == 3 and plan.idempotent_reply is None


@pytest.mark.parametrize("retried_tool", [T1, T1B], ids=["pure-drop", "divergent-tool-result"])
def test_a_one_step_retry_becomes_a_sibling_and_keeps_the_first_generation(retried_tool: dict[str, str]) -> None:
    t = tree()
    turn(t, [U1], "a1")
    turn(t, [U1, assistant("a1"), T1], "a2")
    turn(t, [U1, assistant("a1"), retried_tool], "a2 again")
    assert t.store.get(0).children == [1, 2]
    assert t.store.leaves() == [1, 2]


def test_a_deep_divergence_branches_at_the_deepest_matching_node_and_keeps_both_lines() -> None:
    t = tree()
    three_turns(t)
    turn(t, [U1, assistant("a1"), T1B], "a2 other")
    assert t.store.get(3).parent_id == 0
    assert t.store.leaves() == [2, 3]


def test_a_different_opening_starts_a_second_root() -> None:
    t = tree()
    three_turns(t)
    turn(t, [user("something else")], "b1")
    assert t.store.roots == (0, 3)


def test_a_partially_matched_node_does_not_count() -> None:
    """Resending only the first user message matches no node's whole path: a retry of the first turn is a root."""
    t = tree()
    three_turns(t)
    assert t.plan([U1], None, "f", False).parent_id is None
    # node 1's request messages [t1] match but its assistant is missing: the attach point is node 0
    assert t.plan([U1, assistant("a1"), T1], None, "f", False).parent_id == 0


def test_ties_between_identical_twins_go_to_the_latest_commit() -> None:
    t = tree()
    turn(t, [U1], "a1")
    turn(t, [U1], "a1")
    assert t.plan([U1, assistant("a1"), T1], None, "f", False).parent_id == 1


def test_a_client_written_assistant_attaches_below_the_last_matching_node_as_prompt() -> None:
    t = tree()
    three_turns(t)
    summary = assistant("summary of the work so far")
    messages = [U1, assistant("a1"), T1, assistant("a2"), T2, assistant("a3"), user("compact"), summary, user("go on")]
    event = turn(t, messages, "a4")
    assert event.parent_id == 2
    assert event.request_messages == (user("compact"), summary, user("go on"))
    sequence = t.store.path_sequence(3)
    prompt_start = sequence.spans[2].end
    assert not any(sequence.loss_mask[prompt_start : sequence.spans[3].start]), "the summary must be prompt"


def test_the_echoed_assistant_matches_under_the_librarys_matcher() -> None:
    """Agents echo the reply with extra fields (refusal, annotations) and empty content as None; it still matches."""
    t = tree()
    turn(t, [U1], "")
    echoed: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None, "annotations": []}
    assert t.plan([U1, echoed, T1], None, "f", False).parent_id == 0


def test_other_tools_make_another_opening() -> None:
    t = tree()
    tools = [{"type": "function", "function": {"name": "ls", "parameters": {}}}]
    turn(t, [U1], "a1", tools=tools)
    assert t.plan([U1, assistant("a1"), T1], tools, "f", False).parent_id == 0
    assert t.plan([U1, assistant("a1"), T1], None, "f", False).parent_id is None


def test_extending_a_length_cut_node_is_a_409_but_branching_before_it_is_fine() -> None:
    t = tree()
    turn(t, [U1], "a1")
    turn(t, [U1, assistant("a1"), T1], "cut", finish_reason="length")
    with pytest.raises(TruncatedTurnError, match=r"turn 1 .*cut by the length limit") as caught:
        t.plan([U1, assistant("a1"), T1, assistant("cut"), T2], None, "f", False)
    assert caught.value.http_status == 409
    assert t.plan([U1, assistant("a1"), T1B], None, "f", False).parent_id == 0


def test_concurrent_requests_from_one_node_both_commit_as_siblings() -> None:
    t = tree()
    turn(t, [U1], "a1")
    messages = [U1, assistant("a1"), T1]
    first, second = t.plan(messages, None, "f1", False), t.plan(messages, None, "f2", False)
    for plan, reply in [(first, "x"), (second, "y")]:
        t.check(plan)
        t.apply(commit_event(t, plan, reply))
    assert t.store.get(0).children == [1, 2]


def test_an_sdk_retry_of_a_committed_request_gets_the_committed_turn() -> None:
    t = tree()
    turn(t, [U1], "a1")
    first = turn(t, [U1, assistant("a1"), T1], "a2", fingerprint="same")
    plan = t.plan([U1, assistant("a1"), T1], None, "same", True)
    assert plan.idempotent_reply is first


def test_an_sdk_retry_in_strict_mode_gets_the_committed_turn_instead_of_a_400() -> None:
    t = tree(strict_append_only=True)
    turn(t, [U1], "a1")
    first = turn(t, [U1, assistant("a1"), T1], "a2", fingerprint="same")
    assert t.plan([U1, assistant("a1"), T1], None, "same", True).idempotent_reply is first
    with pytest.raises(StrictAppendOnlyError):
        t.plan([U1, assistant("a1"), T1], None, "same", False)


def test_the_same_request_without_the_retry_flag_samples_a_sibling() -> None:
    t = tree()
    turn(t, [U1], "a1", fingerprint="same")
    assert turn(t, [U1], "a1 again", fingerprint="same").node_id == 1
    assert t.store.roots == (0, 1)


def test_the_node_limit_is_checked_before_the_engine_and_again_at_commit() -> None:
    t = tree(max_nodes=2)
    turn(t, [U1], "a1")
    messages = [U1, assistant("a1"), T1]
    first, second = t.plan(messages, None, "f1", False), t.plan(messages, None, "f2", False)
    t.check(first)
    t.apply(commit_event(t, first, "x"))
    with pytest.raises(TreeCapacityError, match="maximum of 2 nodes") as caught:
        t.check(second)
    assert caught.value.http_status == 409
    with pytest.raises(TreeCapacityError):
        t.plan(messages, None, "f3", False)


def test_a_full_session_still_answers_an_sdk_retry_of_a_committed_turn() -> None:
    t = tree(max_nodes=1)
    first = turn(t, [U1], "a1", fingerprint="same")
    assert t.plan([U1], None, "same", True).idempotent_reply is first


def test_strict_mode_accepts_extensions_of_the_latest_turn() -> None:
    t = tree(strict_append_only=True)
    three_turns(t)
    assert [n.parent_id for n in t.store] == [None, 0, 1]


def test_strict_mode_refuses_a_branch_with_a_400_showing_where_it_diverged() -> None:
    t = tree(strict_append_only=True)
    three_turns(t)
    with pytest.raises(StrictAppendOnlyError, match="strict append-only") as caught:
        t.plan([U1, assistant("a1"), T1B], None, "f", False)
    error = caught.value
    assert (error.http_status, error.index, error.field) == (400, 2, "content")
    assert (error.expected, error.actual) == ("ls: a.py", "ls: b.py")
    with pytest.raises(StrictAppendOnlyError, match="message 0"):
        t.plan([user("another opening")], None, "f", False)


def test_strict_mode_refuses_a_commit_that_lost_a_race_with_409() -> None:
    t = tree(strict_append_only=True)
    turn(t, [U1], "a1")
    messages = [U1, assistant("a1"), T1]
    first, second = t.plan(messages, None, "f1", False), t.plan(messages, None, "f2", False)
    t.check(first)
    t.apply(commit_event(t, first, "x"))
    with pytest.raises(ConcurrentBranchError) as caught:
        t.check(second)
    assert caught.value.http_status == 409


def test_finding_the_attach_point_looks_siblings_up_instead_of_comparing_each() -> None:
    """Thirty retries below one node and a second root: a request reads only the nodes on its own path."""
    t = tree()
    turn(t, [U1], "a1")
    for i in range(30):
        turn(t, [U1, assistant("a1"), tool(f"side {i}")], f"side reply {i}")
    turn(t, [user("other")], "b1")
    read: list[int] = []
    original = t.store.get

    def counting_get(node_id: int):  # type: ignore[no-untyped-def]
        read.append(node_id)
        return original(node_id)

    t.store.get = counting_get  # type: ignore[method-assign]
    request = [U1, assistant("a1"), tool("side 17"), {**assistant("side reply 17"), "refusal": None}, user("next")]
    assert t.plan(request, None, "f", False).parent_id == 18
    assert set(read) == {0, 18}, read


def test_the_default_samples_are_the_linear_sample_of_a_retrying_compacting_agent() -> None:
    """Parity: retries of the same request, an intermediate system message, a user follow-up and a client-written
    assistant; the default picker keeps exactly the path a linear session ends on, bit for bit, plus the leaf that
    answered another request (a different tool result is no retry: it is kept)."""
    t = tree()
    a1, a2, a3 = assistant("a1"), assistant("a2"), assistant("a3")
    turn(t, [U1], "a1")
    turn(t, [U1, a1, T1], "wrong")
    turn(t, [U1, a1, T1], "a2")  # one-step retry of the same request: supersedes "wrong"
    turn(t, [U1, a1, T1, a2, system("be brief")], "a3")
    turn(t, [U1, a1, T1, a2, system("be brief"), a3, T1B], "other result")  # node 4
    turn(t, [U1, a1, T1, a2, system("be brief"), a3, T2], "a4")  # another request: node 4 is not superseded
    history = [U1, a1, T1, a2, system("be brief"), a3, T2, assistant("a4")]
    turn(t, [*history, user("and now?"), assistant("summary"), user("continue")], "a5")

    linear = NodeStore()
    for node in t.store.path(t.store.next_node_id - 1):
        linear.add(node.turn)
    other, sequence = t.sample_sequences()
    assert other.spans[-1].node_id == 4
    expected = linear.path_sequence(t.store.next_node_id - 1)
    assert sequence.tokens.tobytes() == expected.tokens.tobytes()
    shared = other.spans[-1].start  # the prefix both paths hold is trained in node 4's (earlier) sample only
    assert (other.loss_mask[:shared] + sequence.loss_mask[shared:]).tobytes() == expected.loss_mask.tobytes()
    assert (other.logprobs[:shared] + sequence.logprobs[shared:]).tobytes() == expected.logprobs.tobytes()
    assert not any(sequence.loss_mask[:shared])


def test_parallel_siblings_that_both_continued_are_both_sampled_and_shared_nodes_trained_once() -> None:
    t = tree()
    turn(t, [U1], "a1")
    turn(t, [U1, assistant("a1"), T1], "left")  # node 1
    turn(t, [U1, assistant("a1"), T1B], "right")  # node 2
    turn(t, [U1, assistant("a1"), T1, assistant("left"), T2], "left done")  # node 3
    turn(t, [U1, assistant("a1"), T1B, assistant("right"), T2], "right done")  # node 4
    left, right = t.sample_sequences()
    assert (left.spans[-1].node_id, right.spans[-1].node_id) == (3, 4)
    root_in_left, root_in_right = left.spans[0], right.spans[0]
    assert all(left.loss_mask[root_in_left.start : root_in_left.end])
    assert not any(right.loss_mask[root_in_right.start : root_in_right.end])
    assert not any(right.logprobs[root_in_right.start : root_in_right.end])
    for span in right.spans[1:]:
        assert all(right.loss_mask[span.start : span.end]), "the right branch's own nodes are trained"


def test_a_picker_hook_chooses_the_leaves_and_a_broken_one_is_a_422() -> None:
    t = tree(sample_picker="tests.trajectory.test_picking:keep_first_leaf")
    turn(t, [U1], "a1")
    turn(t, [user("other")], "b1")
    assert [s.spans[-1].node_id for s in t.sample_sequences()] == [0]
    broken = tree(sample_picker="tests.trajectory.test_picking:invent_a_leaf")
    turn(broken, [U1], "a1")
    with pytest.raises(SampleHookError) as caught:
        broken.sample_sequences()
    assert caught.value.http_status == 422 and caught.value.hook == "tests.trajectory.test_picking:invent_a_leaf"


def test_the_post_processor_hook_runs_on_the_assembled_samples_with_its_contract_checked() -> None:
    t = tree(sample_postprocessor="tests.trajectory.test_picking:reverse")
    samples = [object(), object()]
    assert t.postprocess_samples(samples) == samples[::-1]
    assert tree().postprocess_samples(samples) == samples


def test_describe_shows_the_forest_its_leaves_and_the_active_path() -> None:
    t = tree()
    three_turns(t)
    turn(t, [U1, assistant("a1"), T1B], "a2 other")
    described = t.describe()
    assert described["trajectory"] == "tree" and described["node_count"] == 4
    assert described["leaves"] == [2, 3] and described["roots"] == [0]
    assert described["active_leaf"] == 3 and described["active_path"] == [0, 3]
    assert described["messages"] == [U1, assistant("a1"), T1B, assistant("a2 other")]
    node = described["nodes"][2]
    assert (node["parent_id"], node["depth"], node["children"], node["finish_reason"]) == (1, 2, [], "stop")
    span = t.store.path_sequence(2).spans[-1]
    assert node["sampled_span"] == [span.start, span.end]
    assert node["sampled_tokens"] == len("a3") + 1 and node["response_id"] == "chatcmpl-2"


def test_an_empty_session_describes_an_empty_forest_and_has_no_samples() -> None:
    t = tree()
    assert t.describe()["active_path"] == [] and t.sample_sequences() == []
    assert t.plan([U1], None, "f", False).stored_ids == array("i")


def test_a_session_replayed_from_its_events_attaches_samples_and_describes_as_the_live_one() -> None:
    live = tree()
    three_turns(live)
    turn(live, [U1, assistant("a1"), T1B], "a2 other", fingerprint="retried")
    replayed = tree()
    for node in live.store:
        replayed.apply(node.turn)
    request = [U1, assistant("a1"), T1B, assistant("a2 other"), T2]
    assert replayed.plan(request, None, "f", False) == live.plan(request, None, "f", False)
    assert replayed.plan([U1, assistant("a1"), T1B], None, "retried", True).idempotent_reply is live.store.get(3).turn
    assert replayed.describe() == live.describe()
    assert [s.tokens for s in replayed.sample_sequences()] == [s.tokens for s in live.sample_sequences()]
