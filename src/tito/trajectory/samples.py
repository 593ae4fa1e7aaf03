"""Samples for the trainer, assembled from a path sequence and the turns on that path.

A sample's `tokens` are the path's ids; `loss_mask` is 1 only on engine-sampled ids; `rollout_logprobs` are
the engine's logprobs there and 0 elsewhere; `response_length` counts from the first sampled id to the end.
`max_seq_len` truncates at turn boundaries: whole turns are kept while they fit, never a cut turn.

Imports nothing from tito but errors, trajectory.base, trajectory.events and trajectory.nodes.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tito.errors import TitoError
from tito.trajectory.base import Trajectory
from tito.trajectory.events import TurnCommitted
from tito.trajectory.nodes import PathSequence

SERVER_OWNED_KEYS = ("session_id", "turns", "truncated_turns", "num_turns")
"""Metadata keys the server writes; a client's metadata never overrides them."""

_STATUS_BY_FINISH = {"stop": "completed", "tool_calls": "completed", "length": "truncated"}


class SampleAssemblyError(TitoError):
    """The session's turns cannot become a sample (no turns, nothing fits `max_seq_len`)."""

    http_status = 422


@dataclass(frozen=True)
class Sample:
    """One training sample: what the engine saw and sampled, token for token."""

    tokens: array[int]
    loss_mask: array[int]
    """`array('b')`: 1 on engine-sampled ids, 0 on prompt ids."""
    rollout_logprobs: array[float]
    """`array('f')`: the engine's logprob of each sampled id, 0.0 where the mask is 0."""
    response_length: int
    """Tokens from the first sampled id to the end (the prompt is `tokens[:-response_length]`)."""
    status: str
    """`completed`, `truncated` (cut by length or by max_seq_len) or `aborted`."""
    reward: float | None
    metadata: Mapping[str, Any]


def assemble_sample(
    session_id: str,
    sequence: PathSequence,
    turns: Sequence[TurnCommitted],
    max_seq_len: int | None = None,
    reward: float | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Sample:
    """The sample of one path: `sequence` from `NodeStore.path_sequence`, `turns` the path's turns, root first."""
    if not turns or not sequence.spans:
        raise SampleAssemblyError(f"session {session_id} has no committed turns to assemble a sample from")
    by_node = {turn.node_id: turn for turn in turns}
    spans = list(sequence.spans)
    kept = len(spans)
    if max_seq_len is not None:
        kept = sum(1 for span in spans if span.end <= max_seq_len)
        if kept == 0:
            raise SampleAssemblyError(
                f"session {session_id}: max_seq_len={max_seq_len} is shorter than the first turn "
                f"({spans[0].end} tokens: prompt and reply), so no whole turn fits"
            )
    end = spans[kept - 1].end
    start = spans[0].start
    last_turn = by_node[spans[kept - 1].node_id]
    status = _STATUS_BY_FINISH.get(last_turn.finish_reason, "aborted")
    if kept < len(spans):
        status = "truncated"
    owned: dict[str, Any] = {
        "session_id": session_id,
        "num_turns": kept,
        "truncated_turns": len(spans) - kept,
        "turns": [
            {"node_id": span.node_id, "finish_reason": by_node[span.node_id].finish_reason,
             **by_node[span.node_id].metadata}
            for span in spans[:kept]
        ],
    }  # fmt: skip
    merged = {key: value for key, value in (metadata or {}).items() if key not in SERVER_OWNED_KEYS}
    merged.update(owned)
    return Sample(
        tokens=sequence.tokens[:end],
        loss_mask=sequence.loss_mask[:end],
        rollout_logprobs=sequence.logprobs[:end],
        response_length=end - start,
        status=status,
        reward=reward,
        metadata=merged,
    )


def session_samples(
    session_id: str,
    trajectory: Trajectory,
    max_seq_len: int | None = None,
    reward: float | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> list[Sample]:
    """Every sample of a session, one per path its trajectory picks (linear: its one path; tree: one per leaf the
    picker keeps, each node trained once), then the session's post-processor: what `/samples` replies and
    `tito journal export` writes, so both give the same bytes. Raises SampleAssemblyError (422) when there is
    nothing to assemble, SampleHookError (422) when a picker or post-processor breaks its contract."""
    turns = {node.node_id: node.turn for node in trajectory.store}
    built = [
        assemble_sample(
            session_id, sequence, [turns[span.node_id] for span in sequence.spans], max_seq_len, reward, metadata
        )
        for sequence in trajectory.sample_sequences()
    ]
    if not built:
        problem = "no committed turns" if len(trajectory.store) == 0 else "no leaf that the sample picker keeps"
        raise SampleAssemblyError(f"session {session_id} has {problem} to assemble a sample from")
    return trajectory.postprocess_samples(built)
