"""Claude Code's billing line marks a sub-agent in the first system text, however often the same text comes back."""

from __future__ import annotations

from typing import Any

from tito.server.sessions.lineage import lineage_of
from tito.trajectory.episode import Lineage

SUBAGENT = Lineage(source="claude-code", kind="subagent")


def system(content: Any) -> list[dict[str, Any]]:
    return [{"role": "system", "content": content}, {"role": "user", "content": "go"}]


def test_the_billing_line_marks_a_sub_agent_in_a_system_text_seen_again_or_changed() -> None:
    marked = "x-anthropic-billing-header: cc_is_subagent=true; " + "You are a sub-agent. " * 1000
    plain = marked.replace("cc_is_subagent=true", "cc_version=2")
    for text in (marked, marked, "".join(marked), plain, plain, marked):  # the same object, an equal one, others
        assert lineage_of({}, system(text)) == (SUBAGENT if "cc_is_subagent=true" in text else None)
    assert lineage_of({}, system([{"type": "text", "text": marked}])) == SUBAGENT
    assert lineage_of({}, system("")) is None and lineage_of({}, [{"role": "user", "content": marked}]) is None
