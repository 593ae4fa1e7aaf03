"""A samples export (`tito journal export`, jsonl or safetensors) as sessions for the inspector, offline.

An export holds each kept leaf's path as a sample: its ids, loss mask and logprobs, and per turn its span (where
its own prompt and sampled ids lie, response id, finish, commit time) and facts (`metadata.turns`), but no
messages. Each session's nodes are rebuilt from its samples' spans (a node shared by several samples is one node,
its logprobs taken where it is trained), and each kept leaf's sample is shown exactly as exported, loss mask
included. With a family's tokenizer the sampled ids are parsed back into the assistant message.

Imports from tito: errors, server.errors, server.inspection.views, tokenizer, trajectory.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from tito.errors import TitoError
from tito.server.errors import SessionNotFoundError
from tito.server.inspection.views import InspectedSession
from tito.tokenizer import TitoTokenizer
from tito.trajectory.codec import SampleDecodeError, decode_safetensors, sample_from_json
from tito.trajectory.events import SessionConfig, TrajectoryKind, TurnCommitted
from tito.trajectory.nodes import PathSequence, SampledSpan
from tito.trajectory.samples import Sample, TurnSpan
from tito.trajectory.tree import TreeTrajectory


class ExportFileError(TitoError):
    """A file that is not a samples export tito wrote; names the line or field."""

    http_status = 400


class ExportedTree(TreeTrajectory):
    """The nodes rebuilt from an export; its samples are the exported ones, never re-picked."""

    def __init__(self) -> None:
        super().__init__(SessionConfig(trajectory=TrajectoryKind.TREE))
        self.exported: list[PathSequence] = []

    def sample_sequences(self) -> list[PathSequence]:
        return list(self.exported)


class ExportSessions:
    """The sessions of one export file, read once."""

    def __init__(self, path: Path, tito_tokenizer: TitoTokenizer | None = None) -> None:
        self.path = path
        self.damage: str | None = None
        by_session: dict[str, list[Sample]] = {}
        for sample in read_samples(path):
            by_session.setdefault(str(sample.metadata.get("session_id", "unknown")), []).append(sample)
        self._sessions = {
            session_id: _session(session_id, samples, tito_tokenizer) for session_id, samples in by_session.items()
        }

    def sessions(self) -> list[InspectedSession]:
        return list(self._sessions.values())

    def session(self, session_id: str, touch: bool = False) -> InspectedSession:
        found = self._sessions.get(session_id)
        if found is None:
            raise SessionNotFoundError(f"the export {self.path} holds no session {session_id!r}")
        return found


def read_samples(path: Path) -> list[Sample]:
    """The samples of a jsonl or safetensors export, each with its turn spans."""
    payload = path.read_bytes()
    if path.suffix == ".safetensors":
        samples = decode_safetensors(payload)
    else:
        samples = []
        for number, line in enumerate(payload.splitlines(), 1):
            if not line.strip():
                continue
            try:
                samples.append(sample_from_json(orjson.loads(line)))
            except (orjson.JSONDecodeError, SampleDecodeError, KeyError, TypeError) as exc:
                raise ExportFileError(
                    f"{path} line {number}: not a sample of `tito journal export --format jsonl`: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
    for index, sample in enumerate(samples):
        if not sample.spans:
            raise ExportFileError(
                f"{path}: sample {index} has no turn spans (written by an older tito); export the journal again"
            )
    return samples


def _session(session_id: str, samples: Sequence[Sample], tito_tokenizer: TitoTokenizer | None) -> InspectedSession:
    """The session's nodes from its samples' spans; a node in several samples is built from the one training it."""
    turns: dict[int, TurnCommitted] = {}
    tree = ExportedTree()
    for sample in samples:
        facts = {int(fact["node_id"]): fact for fact in sample.metadata.get("turns") or ()}
        parent: int | None = None
        for span in sample.spans:
            trained = any(sample.loss_mask[span.start : span.end])
            if span.node_id not in turns or (trained and not any(turns[span.node_id].output_logprobs)):
                turns[span.node_id] = _turn(
                    session_id, sample, span, parent, facts.get(span.node_id, {}), tito_tokenizer
                )
            parent = span.node_id
        spans = tuple(SampledSpan(span.node_id, span.start, span.end, span.prompt_start) for span in sample.spans)
        tree.exported.append(PathSequence(sample.tokens, sample.loss_mask, sample.rollout_logprobs, spans))
    for node_id in sorted(turns):
        tree.apply(turns[node_id])
    times = [turn.at for turn in turns.values()]
    return InspectedSession(
        session_id=session_id,
        status="exported",
        config=tree.config,
        trajectory=tree,
        turns=[turns[node_id] for node_id in sorted(turns)],
        created_at=min(times, default=0.0),
        last_activity=max(times, default=0.0),
        samples_taken=len(samples),
        reward=samples[0].reward,
        tito_tokenizer=tito_tokenizer,
    )


def _turn(
    session_id: str,
    sample: Sample,
    span: TurnSpan,
    parent: int | None,
    facts: Mapping[str, Any],
    tito_tokenizer: TitoTokenizer | None,
) -> TurnCommitted:
    """One node as the export shows it: its prompt beyond the parent's ids, its sampled ids and logprobs."""
    output_ids = sample.tokens[span.start : span.end]
    assistant: dict[str, Any] = {"role": "assistant", "content": None}
    if tito_tokenizer is not None:
        with contextlib.suppress(TitoError):  # unparsable: the ids are still shown, the message stays unknown
            assistant = tito_tokenizer.parse_completion(output_ids, sample.tokens[: span.start]).message
    return TurnCommitted(
        session_id=session_id,
        node_id=span.node_id,
        parent_id=parent,
        kept_parent_ids=span.prompt_start,
        request_messages=(),
        tools=None,
        prompt_ids=sample.tokens[span.prompt_start : span.start],
        output_ids=output_ids,
        output_logprobs=sample.rollout_logprobs[span.start : span.end],
        assistant=assistant,
        finish_reason=span.finish_reason,
        response_id=span.response_id,
        request_fingerprint=f"export-{span.node_id}",
        metadata={key: value for key, value in facts.items() if key not in ("node_id", "finish_reason")},
        at=span.completion_timestamp,
    )
