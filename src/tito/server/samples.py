"""The samples route's work: a session's path sequences become samples for the trainer.

One code path for linear and tree sessions: the trajectory's `sample_sequences()` (linear: its one path; tree: one
per leaf the picker keeps, each node trained once), each assembled by `assemble_sample` with the agent's posted
metadata and reward merged in (never over server-owned keys), then the session's post-processor.

Imports nothing from tito but trajectory and server.models.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tito.server.models import SamplesRequest
from tito.trajectory.base import Trajectory
from tito.trajectory.samples import Sample, SampleAssemblyError, assemble_sample


def build_samples(
    session_id: str, trajectory: Trajectory, asked: SamplesRequest, server_metadata: Mapping[str, Any]
) -> list[Sample]:
    """The session's samples; `server_metadata` (e.g. the engine's name) wins over the agent's keys of that name.

    Raises SampleAssemblyError (422) when the session has no committed turn, and SampleHookError (422) when a
    picker or post-processor breaks its contract."""
    metadata = {**(asked.metadata or {}), **server_metadata}
    reward = asked.reward if asked.reward is not None else _number((asked.metadata or {}).get("reward"))
    turns = {node.node_id: node.turn for node in trajectory.store}
    built = [
        assemble_sample(
            session_id, sequence, [turns[span.node_id] for span in sequence.spans], asked.max_seq_len, reward, metadata
        )
        for sequence in trajectory.sample_sequences()
    ]
    if not built:
        problem = "no committed turns" if len(trajectory.store) == 0 else "no leaf that the sample picker keeps"
        raise SampleAssemblyError(f"session {session_id} has {problem} to assemble a sample from")
    return trajectory.postprocess_samples(built)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
