"""The episode routes requests to conversations and labels them from what their first turns recorded; the journal
codec keeps the labels, so a replayed episode labels alike."""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

import pytest

from tito.errors import AppendOnlyError
from tito.journal.codec import decode_event, encode_event
from tito.trajectory.episode import Episode, Lineage
from tito.trajectory.events import Message, SessionConfig, TrajectoryKind, TurnCommitted
from tito.trajectory.samples import session_samples

TOOLS = ({"type": "function", "function": {"name": "Agent", "parameters": {}}},)


def commit(
    episode: Episode,
    messages: Sequence[Message],
    reply: dict[str, Any],
    tools: Sequence[Message] | None = TOOLS,
    lineage: Lineage | None = None,
) -> TurnCommitted:
    plan = episode.plan(messages, tools, f"fp-{episode.next_node_id}", False, lineage)
    event = TurnCommitted(
        "s", 0, plan.parent_id, len(plan.stored_ids), tuple(plan.appended), None if tools is None else tuple(tools),
        array("i", [1, 2]), array("i", [3, 4, 5]), array("f", [-0.1, -0.2, -0.3]), reply, "stop",
        f"r{episode.next_node_id}", f"fp-{episode.next_node_id}", {}, 0.0,
    )  # fmt: skip
    episode.check(plan)
    stamped = episode.stamp(plan, event)
    episode.apply(stamped)
    return stamped


def spawn_call(prompt: str) -> dict[str, Any]:
    call = {
        "id": "toolu_17",
        "type": "function",
        "function": {"name": "Agent", "arguments": f'{{"prompt": "{prompt}"}}'},
    }
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def test_an_inferred_sub_agent_is_labelled_with_the_tool_call_that_spawned_it() -> None:
    episode = Episode(SessionConfig())
    main = [{"role": "system", "content": "main"}, {"role": "user", "content": "go"}]
    commit(episode, main, spawn_call("find every TODO in src"))
    sub = [{"role": "system", "content": "sub-agent"}, {"role": "user", "content": "find every TODO in src"}]
    commit(episode, sub, {"role": "assistant", "content": "3 found"})
    infos = episode.conversation_infos()
    assert (infos["c1"].kind, infos["c1"].parent, infos["c1"].spawned_by, infos["c1"].inferred) == (
        "subagent",
        "c0",
        "toolu_17",
        True,
    )


def test_the_main_loop_is_the_first_conversation_with_tools_even_after_a_title() -> None:
    """opencode sends its title first: the later conversation with tools is still the main loop."""
    episode = Episode(SessionConfig(trajectory=TrajectoryKind.TREE))
    commit(episode, [{"role": "user", "content": "title please"}], {"role": "assistant", "content": "T"}, None)
    commit(episode, [{"role": "user", "content": "do it"}], {"role": "assistant", "content": "ok"})
    assert {key: info.kind for key, info in episode.conversation_infos().items()} == {"c0": "side", "c1": "main"}
    assert episode.conversation_infos()["c0"].parent == "c1"


def test_every_turn_journals_its_conversation_and_a_replay_labels_alike() -> None:
    live = Episode(SessionConfig())
    events = [
        commit(live, [{"role": "user", "content": "go"}], spawn_call("look")),
        commit(live, [{"role": "user", "content": "look"}], {"role": "assistant", "content": "seen"}, TOOLS,
               Lineage("claude-code", key="claude-code:a1", kind="subagent")),
    ]  # fmt: skip
    replayed = Episode(SessionConfig())
    for event in events:
        kind, payload = encode_event(event)
        decoded = decode_event(kind, payload)
        assert decoded == event
        replayed.apply(decoded)
    assert replayed.conversation_infos() == live.conversation_infos()
    labels = [sample.conversation for sample in session_samples("s", replayed)]
    assert [(label or {}).get("kind") for label in labels] == ["main", "subagent"]


def test_a_rewritten_reply_opens_a_conversation_continuing_the_one_it_left_and_a_retry_still_replaces() -> None:
    """smolagents resends each tool call as "Calling tools:" text: under `harness` a linear episode keeps both
    histories (the rewritten one continues the first, forked from the rewritten reply's node); `strict` refuses."""
    opening = [{"role": "system", "content": "agent"}, {"role": "user", "content": "go"}]
    as_text = {"role": "assistant", "content": "Calling tools: [{'name': 'Agent'}]"}
    observation = {"role": "user", "content": "Observation: done"}
    harness = Episode(SessionConfig(matcher="harness"))
    first = commit(harness, opening, spawn_call("look around here"))
    resent = [*opening, first.assistant, observation]
    second = commit(harness, resent, {"role": "assistant", "content": "ok"})
    retry = harness.plan([*resent[:-1], {"role": "user", "content": "Observation: other"}], TOOLS, "fp-y", False)
    assert (retry.conversation, retry.replaces) == ("c0", second.node_id), "a one-step retry within the conversation"
    plan = harness.plan([*opening, as_text, observation], TOOLS, "fp-x", False)
    assert (plan.conversation, plan.branched, plan.resend is not None) == (None, True, True)
    commit(harness, [*opening, as_text, observation], {"role": "assistant", "content": "ok"})
    infos = harness.conversation_infos()
    assert [(i.kind, i.continues, i.forked_from, i.parent, i.inferred) for i in infos.values()] == [
        ("main", None, None, None, True),
        ("main", "c0", first.node_id, None, True),
    ]
    assert [len(c.trajectory.store) for c in harness.conversations.values()] == [2, 1], "nothing replaced"
    strict = Episode(SessionConfig(matcher="strict"))
    commit(strict, opening, spawn_call("look around here"))
    with pytest.raises(AppendOnlyError, match="message 2 differs"):
        strict.plan([*opening, as_text, observation], TOOLS, "fp-x", False)
    tree = Episode(SessionConfig(matcher="harness", trajectory=TrajectoryKind.TREE))
    commit(tree, opening, spawn_call("look around here"))
    branch = tree.plan([*opening, as_text, observation], TOOLS, "fp-x", False)
    assert (branch.conversation, branch.branched) == ("c0", True), "a tree holds it as a branch"


def test_a_rewritten_head_reply_continues_and_any_other_refused_resend_is_still_refused() -> None:
    """Under `harness` a linear plan refuses both; only the rewritten reply becomes a conversation of its own."""
    opening = [{"role": "system", "content": "agent"}, {"role": "user", "content": "go"}]
    episode = Episode(SessionConfig(matcher="harness"))
    first = commit(episode, opening, {"role": "assistant", "content": "a0"})
    resent = [*opening, first.assistant, {"role": "user", "content": "u1"}]
    second = commit(episode, resent, {"role": "assistant", "content": "a1"})
    history = [*resent, second.assistant, {"role": "user", "content": "u2"}]
    commit(episode, history, {"role": "assistant", "content": "a2"})
    head_rewritten = [*history, {"role": "assistant", "content": "Calling tools: a2"}, {"role": "user", "content": "x"}]
    plan = episode.plan(head_rewritten, TOOLS, "fp-x", False)
    assert (plan.conversation, plan.branched, plan.opening and plan.opening.continues) == (None, True, "c0")
    deep = [*opening, first.assistant, {"role": "user", "content": "not u1"}, *history[4:]]
    with pytest.raises(AppendOnlyError, match="rolls back at most one generated turn"):
        episode.plan(deep, TOOLS, "fp-y", False)


def test_recent_replies_are_the_stored_replies_of_the_last_commits_across_conversations_most_recent_first() -> None:
    episode = Episode(SessionConfig())
    assert episode.recent_replies(4) == []
    main = [{"role": "system", "content": "main"}, {"role": "user", "content": "go"}]
    first = commit(episode, main, spawn_call("find every TODO in src"))
    sub = [{"role": "system", "content": "sub-agent"}, {"role": "user", "content": "find every TODO in src"}]
    second = commit(episode, sub, {"role": "assistant", "content": "3 found"})
    third = commit(episode, [*main, first.assistant, {"role": "tool", "content": "3", "tool_call_id": "toolu_17"}],
                   {"role": "assistant", "content": "done"})  # fmt: skip
    replies = episode.recent_replies(2)
    assert replies == [third.assistant, second.assistant]
    assert all(reply is episode.store.get(node).turn.assistant for reply, node in zip(replies, (2, 1), strict=True))
    assert episode.recent_replies(9) == [third.assistant, second.assistant, first.assistant]
