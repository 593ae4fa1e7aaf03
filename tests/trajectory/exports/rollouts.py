"""A rollout for the real-trainer tests: three tool-using sessions in two groups, each sampled in its own `/samples`
call, as a rollout loop takes them.

Group `g1`: a 3-turn session (system and user prompt, two rounds of tool results) rewarded 1.0 and a 2-turn one
rewarded 0.0; group `g2`: a 4-turn session rewarded 0.5, cut by `BUDGETS` (the others fit them). Turns are
synthetic (`tests.trajectory.turns`), with the facts an engine reply leaves: integer weight versions (one turn
updated mid-reply), a temperature, the request time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from tito.trajectory import create_trajectory
from tito.trajectory.base import Trajectory
from tito.trajectory.events import SessionConfig
from tito.trajectory.samples import Budgets, Sample, session_samples

from ..turns import assistant, commit_event, system, tool, user

PROMPT = [system("you can call tools"), user("solve it")]


def _commit(trajectory: Trajectory, messages: Sequence[dict[str, Any]], reply: str, versions: list[str]) -> None:
    plan = trajectory.plan(messages, None, "", False)
    trajectory.check(plan)
    event = commit_event(trajectory, plan, reply)
    facts = {"weight_versions": versions, "sampling": {"temperature": 0.7}, "requested_at": event.at - 0.5}
    trajectory.apply(replace(event, metadata=facts))


def session(turns: int) -> Trajectory:
    """A session of `turns` turns: the prompt, then a tool result after each reply but the last."""
    trajectory = create_trajectory(SessionConfig())
    messages = list(PROMPT)
    for index in range(turns):
        reply = f"step {index}" if index < turns - 1 else "done"
        _commit(trajectory, messages, reply, ["3", "4"] if index == 1 else ["3"])
        messages += [assistant(reply), tool(f"result {index}")]
    return trajectory


def rollout(budgets: Budgets | None = None) -> list[Sample]:
    """The rollout's samples, one `/samples` call per session, in order g1 (1.0, 0.0), g2 (0.5)."""
    plan = (("s-a", 3, 1.0, "g1"), ("s-b", 2, 0.0, "g1"), ("s-c", 4, 0.5, "g2"))
    return [
        sample
        for session_id, turns, reward, group in plan
        for sample in session_samples(session_id, session(turns), reward=reward, group_id=group, budgets=budgets)
    ]


BUDGETS = Budgets(prompt_length=8, response_length=23)
"""A trainer's budgets that keep g1's sessions whole and cut g2's after its second turn."""
