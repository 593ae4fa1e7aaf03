"""Synthetic turns for trajectory tests: ids stand for messages, so junction and masking logic is visible.

A turn's prompt ids are one id per appended message (1000 + its index in the conversation) then the generation
prompt (9); its sampled ids are the reply's characters then the stop id (7), with logprobs -0.1, -0.2, ...
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

from tito.trajectory.base import Trajectory, TurnPlan
from tito.trajectory.events import Message, TurnCommitted

GENERATION_PROMPT = 9
STOP = 7


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def system(text: str) -> dict[str, Any]:
    return {"role": "system", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def tool(text: str) -> dict[str, Any]:
    return {"role": "tool", "content": text, "tool_call_id": "call_1"}


def commit_event(
    trajectory: Trajectory,
    plan: TurnPlan,
    reply: str,
    *,
    finish_reason: str = "stop",
    fingerprint: str = "",
    tools: Sequence[Message] | None = None,
) -> TurnCommitted:
    """The event the server would commit for `plan` after the engine sampled `reply`."""
    first = len(plan.stored_messages)
    output = [ord(c) for c in reply] + ([STOP] if finish_reason != "length" else [])
    return TurnCommitted(
        session_id="s",
        node_id=trajectory.store.next_node_id,
        parent_id=plan.parent_id,
        kept_parent_ids=len(plan.stored_ids),
        request_messages=tuple(plan.appended),
        tools=None if tools is None else tuple(tools),
        prompt_ids=array("i", [1000 + first + i for i in range(len(plan.appended))] + [GENERATION_PROMPT]),
        output_ids=array("i", output),
        output_logprobs=array("f", [-0.1 * (i + 1) for i in range(len(output))]),
        assistant=assistant(reply),
        finish_reason=finish_reason,
        response_id=f"chatcmpl-{trajectory.store.next_node_id}",
        request_fingerprint=fingerprint or f"fingerprint-{trajectory.store.next_node_id}",
        metadata={},
        at=float(trajectory.store.next_node_id),
    )


def turn(
    trajectory: Trajectory,
    messages: Sequence[Message],
    reply: str,
    *,
    finish_reason: str = "stop",
    fingerprint: str = "",
    is_retry: bool = False,
    tools: Sequence[Message] | None = None,
) -> TurnCommitted:
    """Plan, check and commit one turn as the server does; an SDK retry of a committed request gets that turn."""
    plan = trajectory.plan(messages, tools, fingerprint, is_retry)
    if plan.idempotent_reply is not None:
        return plan.idempotent_reply
    trajectory.check(plan)
    event = commit_event(trajectory, plan, reply, finish_reason=finish_reason, fingerprint=fingerprint, tools=tools)
    trajectory.apply(event)
    return event
