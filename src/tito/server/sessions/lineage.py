"""What a request states about the conversation it belongs to, read from the headers agents send.

A session is an agent episode that holds several conversations (`tito.trajectory.episode`); a request is routed to
one by the lineage it states here, else by the messages it resends. Read, in order:
- `X-Tito-Conversation: <name>` (for harnesses you control), with optional `X-Tito-Conversation-Kind`
  (main/subagent/side/compaction), `X-Tito-Parent-Conversation: <name>` and `X-Tito-Spawned-By: <tool call id>`.
- Codex: `thread-id` (a conversation per thread) and `x-codex-turn-metadata` (JSON): `request_kind: "compaction"`
  opens a compaction conversation of the thread; `thread_source: "subagent"` (or `x-openai-subagent`) marks a
  sub-agent, whose parent is `parent_thread_id` (or `x-codex-parent-thread-id`); the spawning call is found
  by its arguments (`parent_turn_id` names a turn, not a call).
- Claude Code: `x-claude-code-agent-id` (sub-agent requests only; a conversation per agent) with
  `x-claude-code-parent-agent-id`; without an agent id, `cc_is_subagent=true` in the billing line (the first
  system text) marks a sub-agent routed by its messages. The main loop, titles and compactions carry only the
  shared session header: they are routed by their messages.

Imports nothing from tito but trajectory.episode.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from tito.trajectory.episode import Lineage

TITO_CONVERSATION = "x-tito-conversation"
TITO_CONVERSATION_KIND = "x-tito-conversation-kind"
TITO_PARENT_CONVERSATION = "x-tito-parent-conversation"
TITO_SPAWNED_BY = "x-tito-spawned-by"
_KINDS = ("main", "subagent", "side", "compaction")
_MAX_KEY = 200
"""Longer header values are cut: a key names a conversation, it is not stored content."""


def lineage_of(headers: Mapping[str, str], messages: Sequence[Mapping[str, Any]]) -> Lineage | None:
    """The lineage `headers` (and Claude Code's billing line in the first system message) state; None: none."""
    return _tito(headers) or _codex(headers) or _claude_code(headers, messages)


def _value(headers: Mapping[str, str], name: str) -> str | None:
    value = (headers.get(name) or "").strip()
    return value[:_MAX_KEY] or None


def _tito(headers: Mapping[str, str]) -> Lineage | None:
    name = _value(headers, TITO_CONVERSATION)
    if name is None:
        return None
    kind = _value(headers, TITO_CONVERSATION_KIND)
    parent = _value(headers, TITO_PARENT_CONVERSATION)
    return Lineage(
        source="x-tito-conversation",
        key=f"tito:{name}",
        kind=kind if kind in _KINDS else None,
        parent_key=None if parent is None else f"tito:{parent}",
        spawned_by=_value(headers, TITO_SPAWNED_BY),
        fresh=kind == "compaction",
    )


def _codex(headers: Mapping[str, str]) -> Lineage | None:
    thread = _value(headers, "thread-id")
    if thread is None:
        return None
    try:
        metadata = json.loads(headers.get("x-codex-turn-metadata") or "{}")
    except ValueError:
        metadata = {}
    if not isinstance(metadata, dict):
        metadata = {}
    parent = _string(metadata.get("parent_thread_id")) or _value(headers, "x-codex-parent-thread-id")
    subagent = metadata.get("thread_source") == "subagent" or _value(headers, "x-openai-subagent") is not None
    compaction = metadata.get("request_kind") == "compaction"
    kind = "compaction" if compaction else "subagent" if subagent else None
    return Lineage(
        source="codex",
        key=f"codex:{thread}",
        kind=kind,
        parent_key=f"codex:{thread}" if compaction else None if parent is None else f"codex:{parent}",
        fresh=compaction,
    )


def _claude_code(headers: Mapping[str, str], messages: Sequence[Mapping[str, Any]]) -> Lineage | None:
    agent = _value(headers, "x-claude-code-agent-id")
    parent = _value(headers, "x-claude-code-parent-agent-id")
    if agent is not None:
        return Lineage(
            source="claude-code",
            key=f"claude-code:{agent}",
            kind="subagent",
            parent_key=None if parent is None else f"claude-code:{parent}",
        )
    first = messages[0] if messages else {}
    if first.get("role") != "system":
        return None
    content = first.get("content")
    text_marks = _marks_subagent if isinstance(content, str) else _has_subagent_mark
    return Lineage(source="claude-code", kind="subagent") if text_marks(str(content or "")) else None


def _has_subagent_mark(text: str) -> bool:
    return "cc_is_subagent=true" in text


_marks_subagent = functools.lru_cache(maxsize=1)(_has_subagent_mark)
"""The same for a system text seen last: a resent request's is the very string of the previous one (its body's
reader reuses it; its hash is kept in it), so a turn does not search an agent's ~100 KB system prompt again."""


def _string(value: Any) -> str | None:
    return value[:_MAX_KEY] if isinstance(value, str) and value else None


def asks_structured_output(extra: Mapping[str, Any] | None) -> bool:
    """Whether a chat request's extra fields ask for structured output (`response_format` json_schema/json_object)."""
    response_format = (extra or {}).get("response_format")
    return isinstance(response_format, Mapping) and response_format.get("type") in ("json_schema", "json_object")
