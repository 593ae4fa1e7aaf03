"""The samples route's work: a session's path sequences become samples for the trainer.

One code path for linear and tree sessions, shared with `tito journal export`: `trajectory.samples.session_samples`,
with the agent's posted metadata and reward merged in (never over server-owned keys).

Imports nothing from tito but trajectory and server.models.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tito.server.models import SamplesRequest
from tito.trajectory.base import Trajectory
from tito.trajectory.samples import Sample, session_samples


def build_samples(
    session_id: str, trajectory: Trajectory, asked: SamplesRequest, server_metadata: Mapping[str, Any]
) -> list[Sample]:
    """The session's samples; `server_metadata` (e.g. the engine's name) wins over the agent's keys of that name.

    Raises SampleAssemblyError (422) when the session has no committed turn, and SampleHookError (422) when a
    picker or post-processor breaks its contract."""
    metadata = {**(asked.metadata or {}), **server_metadata}
    reward = asked.reward if asked.reward is not None else _number((asked.metadata or {}).get("reward"))
    return session_samples(session_id, trajectory, asked.max_seq_len, reward, metadata)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
