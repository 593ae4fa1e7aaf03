"""Samples for the projection tests: a tree session with two sub-agent leaves and a linear one cut by length.

Turns are synthetic (`tests.trajectory.turns`: ids stand for messages and reply characters), with the facts an
engine reply leaves in a turn's metadata: weight versions (one turn updated mid-reply), sampling parameters with
a per-turn temperature, the request time and cached tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from tito.trajectory import create_episode, create_trajectory
from tito.trajectory.base import Trajectory
from tito.trajectory.episode import Episode
from tito.trajectory.events import SessionConfig, TrajectoryKind, TurnCommitted
from tito.trajectory.samples import Sample, session_samples

from ..turns import assistant, commit_event, tool, user


def commit(trajectory: Trajectory, messages: Sequence[dict[str, Any]], reply: str, versions: list[str],
           temperature: float, finish_reason: str = "stop") -> TurnCommitted:  # fmt: skip
    plan = trajectory.plan(messages, None, "", False)
    trajectory.check(plan)
    event = commit_event(trajectory, plan, reply, finish_reason=finish_reason)
    facts = {"weight_versions": versions, "sampling": {"temperature": temperature, "top_p": 0.95},
             "requested_at": event.at - 0.25, "cached_tokens": 2}  # fmt: skip
    event = replace(event, metadata=facts)
    if isinstance(trajectory, Episode):
        event = trajectory.stamp(plan, event)
    trajectory.apply(event)
    return event


def tree_samples() -> list[Sample]:
    """Root (node 0) -> sub-agent a (1 -> 2) and sub-agent b (3 -> 4); leaf a rewarded 1.0, b by the scalar."""
    tree = create_trajectory(SessionConfig(trajectory=TrajectoryKind.TREE))
    opening = [user("plan"), assistant("p")]
    commit(tree, opening[:1], "p", ["w1"], 0.6)
    leaves = {}
    for agent, tool_result in (("a", "ran a"), ("b", "ran b")):
        branch = [*opening, user(f"sub-agent {agent}"), assistant(f"{agent}1"), tool(tool_result)]
        commit(tree, branch[:3], f"{agent}1", ["w1", "w2"], 0.8)
        leaves[agent] = commit(tree, branch, f"{agent}2!", ["w2"], 1.0).response_id
    return session_samples("tree-session", tree, reward=0.25, rewards={leaves["a"]: 1.0}, group_id="prompt-3",
                           metadata={"env_name": "math", "task": "t1"})  # fmt: skip


def linear_samples() -> list[Sample]:
    """Two turns of a session's episode (its samples name their conversation), the second cut by length; no weight
    versions, no reward, no group."""
    linear = create_episode(SessionConfig())
    commit(linear, [user("q")], "r", [], 0.0)
    commit(linear, [user("q"), assistant("r"), user("more")], "long", [], 0.7, finish_reason="length")
    return session_samples("linear-session", linear)


def all_samples() -> list[Sample]:
    return [*tree_samples(), *linear_samples()]
