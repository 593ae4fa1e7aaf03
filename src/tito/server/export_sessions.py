"""A samples export (`tito journal export`, jsonl or safetensors) as sessions for the inspector, offline.

An export holds each kept leaf's path as a sample: its ids, loss mask and logprobs, and per turn its node id and
facts (`metadata.turns`: prompt and completion lengths, finish, timings, weight versions, invalid calls), but no
messages. Each session's nodes are rebuilt from its samples (a node shared by several samples is one node, its
logprobs taken where it is trained), and each kept leaf's sample is shown exactly as exported (its loss mask
included). A junction that dropped trailing ids (GLM) is known only from the family: pass `--family`.

Imports from tito: errors, server (its modules), tokenizer, trajectory.
"""

from __future__ import annotations

import contextlib
from array import array
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from tito.errors import TitoError
from tito.server.errors import SessionNotFoundError
from tito.server.inspection import InspectedSession
from tito.tokenizer import TitoTokenizer
from tito.trajectory.codec import decode_safetensors
from tito.trajectory.events import SessionConfig, TrajectoryKind, TurnCommitted
from tito.trajectory.nodes import PathSequence, SampledSpan
from tito.trajectory.samples import Sample
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
        written = path.stat().st_mtime  # an export records no times: the file's stands in
        self._sessions = {
            session_id: _session(session_id, samples, tito_tokenizer, written)
            for session_id, samples in by_session.items()
        }

    def sessions(self) -> list[InspectedSession]:
        return list(self._sessions.values())

    def session(self, session_id: str, touch: bool = False) -> InspectedSession:
        found = self._sessions.get(session_id)
        if found is None:
            raise SessionNotFoundError(f"the export {self.path} holds no session {session_id!r}")
        return found


def read_samples(path: Path) -> list[Sample]:
    """The samples of a jsonl or safetensors export."""
    payload = path.read_bytes()
    if path.suffix == ".safetensors":
        return decode_safetensors(payload)
    samples = []
    for number, line in enumerate(payload.splitlines(), 1):
        if not line.strip():
            continue
        try:
            body = orjson.loads(line)
            samples.append(
                Sample(
                    tokens=array("i", body["tokens"]),
                    loss_mask=array("b", body["loss_mask"]),
                    rollout_logprobs=array("f", body["rollout_logprobs"]),
                    response_length=int(body["response_length"]),
                    status=str(body["status"]),
                    reward=body["reward"],
                    metadata=dict(body["metadata"]),
                )
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, OverflowError) as exc:
            raise ExportFileError(
                f"{path} line {number}: not a sample of `tito journal export --format jsonl`: {type(exc).__name__}: "
                f"{exc}"
            ) from exc
    return samples


def _session(
    session_id: str, samples: Sequence[Sample], tito_tokenizer: TitoTokenizer | None, written: float
) -> InspectedSession:
    dropped = tito_tokenizer.family.junction.trailing_ids_dropped if tito_tokenizer is not None else 0
    turns: dict[int, TurnCommitted] = {}
    tree = ExportedTree()
    for sample in samples:
        facts: list[Mapping[str, Any]] = list(sample.metadata.get("turns") or [])
        spans: list[SampledSpan] = []
        length = 0
        for index, fact in enumerate(facts):
            node_id = int(fact["node_id"])
            sampled_start = int(fact.get("prompt_tokens", length))
            end = sampled_start + int(fact.get("completion_tokens", 0))
            if index + 1 < len(facts):
                end -= dropped  # the next turn dropped them at the junction: the sample does not hold them
            end = min(end, len(sample.tokens))
            spans.append(SampledSpan(node_id, sampled_start, end))
            trained = any(sample.loss_mask[sampled_start:end])
            if node_id not in turns or (trained and not any(turns[node_id].output_logprobs)):
                turns[node_id] = _turn(session_id, fact, sample, length, sampled_start, end, spans, tito_tokenizer)
            length = end
        tree.exported.append(PathSequence(sample.tokens, sample.loss_mask, sample.rollout_logprobs, tuple(spans)))
    for node_id in sorted(turns):
        tree.apply(turns[node_id])
    return InspectedSession(
        session_id=session_id,
        status="exported",
        config=tree.config,
        trajectory=tree,
        turns=[turns[node_id] for node_id in sorted(turns)],
        created_at=written,
        last_activity=written,
        samples_taken=len(samples),
        reward=samples[0].reward if samples else None,
        tito_tokenizer=tito_tokenizer,
    )


def _turn(
    session_id: str,
    fact: Mapping[str, Any],
    sample: Sample,
    kept: int,
    sampled_start: int,
    end: int,
    spans: Sequence[SampledSpan],
    tito_tokenizer: TitoTokenizer | None,
) -> TurnCommitted:
    """One node as the export shows it: its prompt beyond the parent's ids, its sampled ids and logprobs."""
    output_ids = sample.tokens[sampled_start:end]
    assistant: dict[str, Any] = {"role": "assistant", "content": None}
    if tito_tokenizer is not None:
        with contextlib.suppress(TitoError):  # unparsable: the ids are still shown, the message stays unknown
            assistant = tito_tokenizer.parse_completion(output_ids, sample.tokens[:sampled_start]).message
    metadata = {key: value for key, value in fact.items() if key not in ("node_id", "finish_reason")}
    return TurnCommitted(
        session_id=session_id,
        node_id=int(fact["node_id"]),
        parent_id=spans[-2].node_id if len(spans) > 1 else None,
        kept_parent_ids=kept,
        request_messages=(),
        tools=None,
        prompt_ids=sample.tokens[kept:sampled_start],
        output_ids=output_ids,
        output_logprobs=sample.rollout_logprobs[sampled_start:end],
        assistant=assistant,
        finish_reason=str(fact.get("finish_reason", "stop")),
        response_id="",
        request_fingerprint=f"export-{fact['node_id']}",
        metadata=metadata,
        at=0.0,
    )
