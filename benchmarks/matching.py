"""The harness matching policy: what planning a turn costs when an agent framework rewrites every reply it resends.

For each conversation length (agent turns: an assistant reply with about 60 tokens of reasoning, 100 of content and
one tool call, then a tool result), one run builds a linear and a tree session under `harness` and measures
`Trajectory.plan` for the next request (the whole history plus a new tool result, deep-copied as if parsed from
JSON), side by side:
  exact      the replies resent verbatim (equal lists: decided in C)
  echoed     the replies as the openai SDK's `model_dump()` echoes them (an extra `refusal: null`) in a `strict`
             session: each assistant is compared in Python, the cost sessions paid before policies existed
  framework  the replies as openai-agents or pydantic-ai resend them: no `reasoning_content`, compact arguments
             (every assistant needs the harness rules)
Target: framework plan <= 2 ms at 100 turns. framework/echoed says what the rules cost over the strict per-message
comparison (linear: about the same work; tree: a strict session's match key alone decides, so it compares nothing).

Run from the repository root: PYTHONPATH=src python benchmarks/matching.py [--turns 10 100 400]
"""

from __future__ import annotations

import argparse
import copy
import json
from array import array
from typing import Any

from tito.trajectory import create_trajectory
from tito.trajectory.base import Trajectory
from tito.trajectory.events import SessionConfig, TrajectoryKind, TurnCommitted
from tree import best_of_each  # benchmarks/tree.py, beside this script

TARGET_PLAN_MS = 2.0
SENTENCE = "The agent read the failing test, found the junction bug and patched the template again. "


def reply(i: int) -> dict[str, Any]:
    arguments = json.dumps({"path": f"src/module_{i}.py", "line": i, "dry_run": False})
    return {
        "role": "assistant",
        "content": f"[{i}] " + SENTENCE * 4,
        "reasoning_content": f"[{i}] " + SENTENCE * 3,
        "tool_calls": [{"id": f"call_{i}", "type": "function", "function": {"name": "edit", "arguments": arguments}}],
    }


def as_a_framework_resends_it(message: dict[str, Any]) -> dict[str, Any]:
    if message["role"] != "assistant":
        return message
    calls = [
        {**call, "function": {**call["function"], "arguments": json.dumps(json.loads(call["function"]["arguments"]),
                                                                           separators=(",", ":"))}}
        for call in message["tool_calls"]
    ]  # fmt: skip
    return {"role": "assistant", "content": message["content"], "tool_calls": calls}


def tool_result(i: int) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": f"call_{i}", "content": f"[{i}] " + SENTENCE * 4}


def build(kind: TrajectoryKind, matcher: str, turns: int) -> tuple[Trajectory, list[dict[str, Any]]]:
    trajectory = create_trajectory(SessionConfig(trajectory=kind, matcher=matcher))
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing tests."}]
    for i in range(turns):
        plan = trajectory.plan(messages, None, f"f{i}", False)
        node_id = trajectory.store.next_node_id
        trajectory.apply(
            TurnCommitted(
                session_id="bench", node_id=node_id, parent_id=plan.parent_id,
                kept_parent_ids=len(plan.stored_ids), request_messages=tuple(plan.appended), tools=None,
                prompt_ids=array("i", range(50)), output_ids=array("i", range(200)),
                output_logprobs=array("f", bytes(800)), assistant=reply(i), finish_reason="tool_calls",
                response_id=f"chatcmpl-{node_id}", request_fingerprint=f"f{i}", metadata={}, at=0.0,
            )
        )  # fmt: skip
        messages = [*messages, reply(i), tool_result(i)]
    return trajectory, messages


def plan_times(kind: TrajectoryKind, turns: int) -> dict[str, float]:
    harness, messages = build(kind, "harness", turns)
    strict, _ = build(kind, "strict", turns)
    exact = copy.deepcopy(messages)
    echoed = [{**m, "refusal": None} if m["role"] == "assistant" else m for m in copy.deepcopy(messages)]
    rewritten = [as_a_framework_resends_it(message) for message in copy.deepcopy(messages)]
    assert harness.plan(rewritten, None, "new", False).parent_id == harness.store.next_node_id - 1
    return best_of_each(
        {
            "exact": lambda: harness.plan(exact, None, "new", False),
            "echoed": lambda: strict.plan(echoed, None, "new", False),
            "framework": lambda: harness.plan(rewritten, None, "new", False),
        }
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, nargs="+", default=[10, 100, 400])
    args = parser.parse_args()
    print(
        f"{'session':>7} {'turns':>6} {'exact us':>9} {'echoed us':>10} {'framework us':>13} {'framework/echoed':>17}"
    )
    failed = False
    for kind in (TrajectoryKind.LINEAR, TrajectoryKind.TREE):
        for turns in args.turns:
            times = plan_times(kind, turns)
            ratio = times["framework"] / times["echoed"]
            print(
                f"{kind.value:>7} {turns:>6} {times['exact'] * 1e6:>9.0f} {times['echoed'] * 1e6:>10.0f} "
                f"{times['framework'] * 1e6:>13.0f} {ratio:>17.2f}"
            )
            failed |= turns <= 100 and times["framework"] * 1e3 > TARGET_PLAN_MS
    print("targets " + ("missed" if failed else "met"))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
