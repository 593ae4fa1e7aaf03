"""The inspector's views of a session as JSON: a list row, the tree with each node's facts, one turn's tokens.

Live sessions and replayed journals both become an `InspectedSession` (its committed turns and its trajectory), so
`tito serve` and `tito inspect` answer the read API with the same code. A turn's tokens are its path's ids with the
loss mask its sample trains (the picker and train-once applied), the engine's logprobs, the junction ids tito
inserted, and every tool-call attempt with its parse status. Text pieces, junction ids and parse statuses need the
family's tokenizer; without one (a journal inspected without `--family`) the view says so and shows ids only.

Imports from tito: errors, server.errors, tokenizer, trajectory.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tito.errors import TitoError
from tito.server.errors import SessionNotFoundError
from tito.tokenizer import TitoTokenizer
from tito.trajectory.base import Trajectory
from tito.trajectory.episode import Episode
from tito.trajectory.events import SessionConfig, TurnCommitted
from tito.trajectory.nodes import NodeStore, PathSequence

Json = dict[str, Any]


@dataclass
class InspectedSession:
    """What the inspector reads of one session, live or replayed."""

    session_id: str
    status: str
    """`live`, `generating` (a turn in flight), `deleted` or `expired`."""
    config: SessionConfig
    trajectory: Trajectory
    turns: Sequence[TurnCommitted]
    """Every committed turn known, in commit order; a replayed linear session also keeps the retries it superseded."""
    created_at: float
    last_activity: float
    """Wall-clock time of the latest event (or request)."""
    samples_taken: int = 0
    reward: float | None = None
    tito_tokenizer: TitoTokenizer | None = None
    """The family's tokenizer (text pieces, junction ids, parse statuses); None: ids only."""
    pieces: dict[int, str] = field(default_factory=dict)
    """Decoded text of each id seen so far (shared by a source's sessions of one tokenizer)."""
    resends: Mapping[str, Any] | None = None
    """How the session's resends matched (`server.sessions.resends.ResendCounts.as_json`); None: not counted (a
    journal)."""


def session_row(session: InspectedSession) -> Json:
    """One line of `GET /sessions`."""
    store = session.trajectory.store
    latest = max((node.node_id for node in store), default=None)
    return {
        "session_id": session.session_id,
        "status": session.status,
        "trajectory": session.config.trajectory.value,
        "turns": len(store),
        "superseded_turns": len(session.turns) - len(store),
        "tokens": 0 if latest is None else store.path_length(latest),
        "sampled_tokens": sum(len(node.turn.output_ids) for node in store),
        "conversations": len(_conversation_kinds(session)) or int(bool(len(store))),
        "reward": session.reward,
        "samples_taken": session.samples_taken,
        "created_at": session.created_at,
        "last_activity": session.last_activity,
    }


def _conversation_kinds(session: InspectedSession) -> dict[str, str]:
    """Each conversation's kind, by id (none for a trajectory that is not an episode, e.g. an imported export)."""
    trajectory = session.trajectory
    if not isinstance(trajectory, Episode):
        return {}
    return {key: info.kind for key, info in trajectory.conversation_infos().items()}


def session_detail(session: InspectedSession) -> Json:
    """`GET /sessions/{id}`: the trajectory's own description, the list row (`summary`) and the tree the page draws."""
    return {
        "session_id": session.session_id,
        "status": session.status,
        "matcher": session.config.matcher,
        **({} if session.resends is None else {"resends": dict(session.resends)}),
        **session.trajectory.describe(),
        "summary": session_row(session),
        "tree": _tree(session),
    }


def _tree(session: InspectedSession) -> Json:
    """Every known node with its facts and its fate: kept (in a sample), dropped by the picker, or superseded."""
    store = session.trajectory.store
    picker_error: str | None = None
    kept_leaves: list[int] = []
    trained_in: dict[int, int] = {}
    try:
        sequences = session.trajectory.sample_sequences()
    except TitoError as exc:  # a picker hook that breaks its contract: show the tree, say why nothing is kept
        picker_error, sequences = str(exc), []
    for sequence in sequences:
        leaf = sequence.spans[-1].node_id
        kept_leaves.append(leaf)
        for span in sequence.spans:
            if span.end > span.start and sequence.loss_mask[span.start]:
                trained_in.setdefault(span.node_id, leaf)
    children: dict[int | None, list[int]] = {}
    depth: dict[int, int] = {}
    for turn in session.turns:
        children.setdefault(turn.parent_id, []).append(turn.node_id)
        depth[turn.node_id] = 0 if turn.parent_id is None else depth.get(turn.parent_id, 0) + 1
    active = [] if not len(store) else [node.node_id for node in store.path(max(node.node_id for node in store))]
    kinds = _conversation_kinds(session)
    nodes = []
    for turn in session.turns:
        in_store = turn.node_id in store
        fate = "superseded" if not in_store else ("kept" if turn.node_id in trained_in else "dropped")
        metadata = turn.metadata
        conversation = turn.conversation_id
        nodes.append(
            {
                "node_id": turn.node_id,
                "parent_id": turn.parent_id,
                "children": children.get(turn.node_id, []),
                "depth": depth[turn.node_id],
                "role": "assistant",
                "appended_roles": [str(message.get("role")) for message in turn.request_messages],
                "finish_reason": turn.finish_reason,
                "engine_finish": metadata.get("engine_finish"),
                "weight_versions": metadata.get("weight_versions", []),
                "timings": metadata.get("timings", {}),
                "prompt_ids": len(turn.prompt_ids),
                "sampled_ids": len(turn.output_ids),
                "tool_calls": len(turn.assistant.get("tool_calls") or ()),
                "invalid_tool_calls": len(metadata.get("invalid_tool_calls", ())),
                "committed_at": turn.at,
                "fate": fate,
                "kept_leaf": turn.node_id in kept_leaves,
                "trained_in": trained_in.get(turn.node_id),
                "active": turn.node_id in active,
                "preview": _preview(turn.assistant),
                "conversation": conversation,
                "conversation_kind": kinds.get(conversation),
            }
        )
    return {
        "nodes": nodes,
        "roots": children.get(None, []),
        "kept_leaves": kept_leaves,
        "active_path": active,
        "picker_error": picker_error,
    }


def _preview(message: Mapping[str, Any], limit: int = 80) -> str:
    content = message.get("content")
    text = content if isinstance(content, str) else ""
    if not text and message.get("tool_calls"):
        text = ", ".join(f"{call.get('function', {}).get('name')}()" for call in message["tool_calls"])
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def turn_detail(session: InspectedSession, node_id: int) -> Json:
    """`GET /sessions/{id}/turns/{node}`: the node's path as messages and as tokens."""
    by_id = {turn.node_id: turn for turn in session.turns}
    if node_id not in by_id:
        known = f"nodes 0..{max(by_id)}" if by_id else "no committed turns"
        raise SessionNotFoundError(f"session {session.session_id} has no node {node_id} ({known})")
    path = _path(by_id, node_id)
    sequence = _sequence(session, path)
    ids = sequence.tokens.tolist()
    spans, messages = _spans_and_messages(session, path)
    turn = path[-1]
    tito_tokenizer = session.tito_tokenizer
    return {
        "session_id": session.session_id,
        "node_id": node_id,
        "parent_id": turn.parent_id,
        "path": [step.node_id for step in path],
        "finish_reason": turn.finish_reason,
        "metadata": dict(turn.metadata),
        "tools": list(turn.tools or path[0].tools or ()),
        "messages": messages,
        "spans": spans,
        "tokens": {
            "ids": ids,
            "pieces": None if tito_tokenizer is None else _pieces(tito_tokenizer, session.pieces, ids),
            "logprobs": [round(value, 5) for value in sequence.logprobs.tolist()],
            "loss_mask": sequence.loss_mask.tolist(),
        },
        "tool_call_attempts": _attempts(session, path, sequence),
        "tokenizer": None if tito_tokenizer is None else tito_tokenizer.family.name,
    }


def _path(by_id: Mapping[int, TurnCommitted], node_id: int) -> list[TurnCommitted]:
    path = [by_id[node_id]]
    while path[-1].parent_id is not None:
        path.append(by_id[path[-1].parent_id])
    path.reverse()
    return path


def _sequence(session: InspectedSession, path: Sequence[TurnCommitted]) -> PathSequence:
    """The path's ids, mask and logprobs; for a leaf the picker keeps, the mask of its sample (a node trained in an
    earlier sample is 0 here, as the trainer gets it)."""
    leaf = path[-1].node_id
    if leaf in session.trajectory.store and not session.trajectory.store.get(leaf).children:
        try:
            for sequence in session.trajectory.sample_sequences():
                if sequence.spans[-1].node_id == leaf:
                    return sequence
        except TitoError:
            pass  # the picker is broken: the tree view says so; show the path as sampled
    store = NodeStore()  # a superseded node is no longer in the trajectory: rebuild its path alone
    for turn in path:
        store.add(turn)
    return store.path_sequence(leaf)


def _spans_and_messages(session: InspectedSession, path: Sequence[TurnCommitted]) -> tuple[list[Json], list[Json]]:
    """Per path node: where its prompt, junction and sampled ids lie; and the conversation, each message with the
    token range of its turn (request messages: the turn's prompt ids; the assistant: its sampled ids)."""
    spans: list[Json] = []
    messages: list[Json] = []
    length = 0
    previous_last: int | None = None
    for turn in path:
        start = turn.kept_parent_ids
        dropped = length - start
        junction = 0 if previous_last is None else _junction_ids(session.tito_tokenizer, previous_last)
        sampled_start = start + len(turn.prompt_ids)
        length = sampled_start + len(turn.output_ids)
        if spans:
            spans[-1]["end"] = min(spans[-1]["end"], start)
        spans.append(
            {
                "node_id": turn.node_id,
                "prompt_start": start,
                "junction_end": start + min(junction, len(turn.prompt_ids)),
                "dropped_ids": dropped,
                "sampled_start": sampled_start,
                "end": length,
            }
        )
        for message in turn.request_messages:
            messages.append({"node_id": turn.node_id, "tokens": [start, sampled_start], "message": dict(message)})
        messages.append({"node_id": turn.node_id, "tokens": [sampled_start, length], "message": dict(turn.assistant)})
        previous_last = turn.output_ids[-1] if len(turn.output_ids) else None
    return spans, messages


def _junction_ids(tito_tokenizer: TitoTokenizer | None, stored_last_id: int) -> int:
    """How many ids tito inserts after stored ids ending in `stored_last_id`, by the family's junction rule: the
    closing a non-end-of-turn stop token needs, then the template's trailer (Qwen's `\\n`). 0 without a tokenizer."""
    if tito_tokenizer is None:
        return 0
    family, tokenizer = tito_tokenizer.family, tito_tokenizer.tokenizer
    stop = tokenizer.convert_ids_to_tokens(int(stored_last_id))
    closing = family.junction.closing_after(str(stop), family.end_of_turn, family.stop_closing) or ""
    anchor = family.junction.anchor_prefix(family.end_of_turn) if family.end_of_turn else ""
    trailer = len(tokenizer.encode(anchor, add_special_tokens=False)) - 1 if anchor else 0
    return (len(tokenizer.encode(closing, add_special_tokens=False)) if closing else 0) + trailer


def _pieces(tito_tokenizer: TitoTokenizer, cache: dict[int, str], ids: Sequence[int]) -> list[str]:
    """Each id's own text (a piece of a multi-byte character decodes to U+FFFD, as the tokenizer gives it)."""
    decode = tito_tokenizer.tokenizer.decode
    pieces = []
    for token in ids:
        piece = cache.get(token)
        if piece is None:
            piece = cache[token] = decode([token], skip_special_tokens=False)
        pieces.append(piece)
    return pieces


def _attempts(session: InspectedSession, path: Sequence[TurnCommitted], sequence: PathSequence) -> list[Json]:
    """Every tool-call attempt of the node's completion with its parse status, from a re-parse of the sampled ids
    with the family's parser (the parse the turn got: deterministic); without a tokenizer, from the recorded facts
    (the message's calls, status `in_message`, and the recorded invalid attempts)."""
    turn = path[-1]
    tito_tokenizer = session.tito_tokenizer
    if tito_tokenizer is not None:
        prompt_end = sequence.spans[-1].start if sequence.spans else 0
        prompt_ids: array[int] = sequence.tokens[:prompt_end]
        try:
            result = tito_tokenizer.parse_completion(turn.output_ids, prompt_ids, path[0].tools)
        except TitoError:
            result = None
        if result is not None:
            return [
                {"index": a.index, "status": a.status.value, "name": a.name, "arguments": a.arguments,
                 "raw": a.raw, "detail": a.detail}
                for a in result.attempts
            ]  # fmt: skip
    recorded: list[Json] = [
        {"index": index, "status": "in_message", "name": call.get("function", {}).get("name"),
         "arguments": call.get("function", {}).get("arguments"), "raw": "", "detail": ""}
        for index, call in enumerate(turn.assistant.get("tool_calls") or ())
    ]  # fmt: skip
    for failed in turn.metadata.get("invalid_tool_calls", ()):
        recorded.append({"arguments": None, **failed})
    return recorded
