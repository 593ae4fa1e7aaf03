"""The episode routes requests to conversations and labels them from what their first turns recorded; the journal
codec keeps the labels, so a replayed episode labels alike."""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

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
