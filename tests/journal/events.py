"""Deterministic session events for the journal tests: the same index always gives the same event, so a crashed
child process and the test that checks its journal agree on what was written."""

from __future__ import annotations

import dataclasses
import math
from array import array
from pathlib import Path

from tito.journal.writer import FsyncPolicy, JournalWriter
from tito.trajectory.events import (
    SamplesTaken,
    SessionConfig,
    SessionCreated,
    SessionDeleted,
    SessionEvent,
    TrajectoryKind,
    TurnCommitted,
)


def created(session_id: str, at: float = 1000.0, ttl_seconds: float | None = None) -> SessionCreated:
    config = SessionConfig(
        trajectory=TrajectoryKind.TREE,
        chat_template_kwargs={"enable_thinking": True},
        allowed_append_roles=("tool", "user"),
        max_nodes=64,
        strict_append_only=True,
        ttl_seconds=ttl_seconds,
        sample_picker="tito.trajectory.picking:drop_superseded_retries",
        sample_postprocessor="package.module:postprocess",
        matcher="harness",
        hosted_tools="refuse",
    )
    return SessionCreated(session_id=session_id, config=config, at=at)


def turn(
    session_id: str, node_id: int, prompt_len: int = 40, output_len: int = 12, at: float = 1001.0
) -> TurnCommitted:
    """A turn whose ids and logprobs depend on (session, node): distinct per turn, reproducible."""
    seed = sum(map(ord, session_id)) * 1000 + node_id
    prompt = array("i", ((seed * 7919 + i * 104729) % 151_000 for i in range(prompt_len)))
    output = array("i", ((seed * 31 + i * 17) % 151_000 for i in range(output_len)))
    logprobs = array("f", (-((seed + i) % 97) / 13.0 for i in range(output_len)))
    return TurnCommitted(
        session_id=session_id,
        node_id=node_id,
        parent_id=node_id - 1 if node_id else None,
        kept_parent_ids=3 * node_id,
        request_messages=({"role": "user", "content": f"turn {node_id}: héllo 世界 🚀"},),
        tools=({"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}},),
        prompt_ids=prompt,
        output_ids=output,
        output_logprobs=logprobs,
        assistant={"role": "assistant", "content": "ok", "tool_calls": []},
        finish_reason="stop",
        response_id=f"chatcmpl-{session_id}-{node_id}",
        request_fingerprint=f"fp{seed}",
        metadata={"weight_version": 3, "timings": {"engine_s": 0.25}, "nan_ok": math.inf},
        at=at + node_id,
    )


def scripted_event(index: int) -> SessionEvent:
    """Event `index` of an endless script: sessions of 1 creation + 4 turns, every third one then deleted."""
    session, step = divmod(index, 6)
    session_id = f"s{session}"
    if step == 0:
        return created(session_id)
    if step < 5:
        return turn(session_id, step - 1)
    if session % 3 == 2:
        return SessionDeleted(session_id=session_id, at=2000.0)
    return SamplesTaken(session_id=session_id, at=2000.0)


def same_event(a: SessionEvent, b: SessionEvent) -> bool:
    """Equal, with arrays compared bit for bit (NaN logprobs and -0.0 included)."""
    if isinstance(a, TurnCommitted) and isinstance(b, TurnCommitted):
        arrays = ("prompt_ids", "output_ids", "output_logprobs")
        if any(getattr(a, n).typecode != getattr(b, n).typecode for n in arrays):
            return False
        if any(getattr(a, n).tobytes() != getattr(b, n).tobytes() for n in arrays):
            return False
        rest = [f.name for f in dataclasses.fields(TurnCommitted) if f.name not in arrays]
        return all(getattr(a, name) == getattr(b, name) for name in rest)
    return a == b


def script_index(event: SessionEvent) -> int:
    """The `scripted_event` index that produced `event`."""
    session = int(event.session_id.removeprefix("s"))
    if isinstance(event, SessionCreated):
        return 6 * session
    if isinstance(event, TurnCommitted):
        return 6 * session + event.node_id + 1
    return 6 * session + 5


def deleted_by_script(session_id: str, written: int) -> bool:
    """Whether the first `written` scripted events include the deletion of `session_id`."""
    session = int(session_id.removeprefix("s"))
    return session % 3 == 2 and 6 * session + 5 < written


LEGACY_HUGE = 2**70
"""A value servers recorded before requests were range-checked (a `seed`, a `max_nodes`); 64-bit JSON refuses it."""


def write_legacy_journal(directory: Path) -> tuple[str, str]:
    """A journal as a server wrote it before requests were range-checked: session `poisoned`, created with
    `max_nodes` LEGACY_HUGE, whose turn sampled with `seed` LEGACY_HUGE, next to a plain session `plain`; both
    sampled (so both have ended). Returns their ids."""
    poisoned, plain = "poisoned", "plain"
    huge = SessionConfig(trajectory=TrajectoryKind.TREE, max_nodes=LEGACY_HUGE)
    events: list[SessionEvent] = [
        SessionCreated(poisoned, huge, 1000.0),
        SessionCreated(plain, SessionConfig(), 1000.0),
    ]
    seeded = dataclasses.replace(turn(poisoned, 0), metadata={"sampling": {"seed": LEGACY_HUGE, "temperature": 1.0}})
    events += [seeded, turn(plain, 0)]
    events += [SamplesTaken(poisoned, 2000.0), SamplesTaken(plain, 2000.0)]
    with JournalWriter(directory, FsyncPolicy.NEVER) as writer:
        for event in events:
            writer.append_blocking(event)
    return poisoned, plain
