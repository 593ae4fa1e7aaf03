"""Samples for the trainer, assembled from a path sequence and the turns on that path.

A sample's `tokens` are the path's ids; `loss_mask` is 1 only on engine-sampled ids; `rollout_logprobs` are
the engine's logprobs there and 0 elsewhere; `response_length` counts from the first sampled id to the end;
`spans` say, turn by turn, which ids each turn appended and sampled and under what (response id, weight version,
sampling parameters, timestamps). `max_seq_len` truncates at turn boundaries: whole turns are kept while they fit,
never a cut turn; a trainer's two budgets (verl's `prompt_length` and `response_length`) cut the same way: the
response keeps whole turns while they fit, a prompt over its budget is refused (nothing to cut it at). Every
trainer format (`trajectory.exports`) is a projection of this one model.

Rewards: `rewards` keyed by response id give each sample the reward of its last turn's response id, else the
scalar `reward`; each span carries the reward posted for its own response id (step-wise trainers read it).
Metadata, lowest layer first: the fold over the sample's turns (`FOLDED_KEYS`) < the agent's posted metadata <
the server-owned keys (`SERVER_OWNED_KEYS`, and the engine facts the server adds), which nobody overrides.

Imports nothing from tito but errors, trajectory.base, trajectory.episode, trajectory.events and trajectory.nodes.
"""

from __future__ import annotations

from array import array
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tito.errors import TitoError
from tito.trajectory.base import Trajectory
from tito.trajectory.episode import Episode
from tito.trajectory.events import Message, TurnCommitted
from tito.trajectory.nodes import PathSequence, SampledSpan

SERVER_OWNED_KEYS = ("session_id", "turns", "truncated_turns", "num_turns")
"""Metadata keys the server writes; a client's metadata never overrides them."""
FOLDED_KEYS = ("weight_versions", "cached_tokens")
"""Metadata folded over a sample's turns (versions in order, repeats merged; cached prompt tokens summed): the
lowest layer, which the agent's metadata may override."""

_REQUESTED_AT = "requested_at"
"""The turn metadata key of the wall-clock time its request reached tito."""
_STATUS_BY_FINISH = {"stop": "completed", "tool_calls": "completed", "length": "truncated"}


class SampleAssemblyError(TitoError):
    """The session's turns cannot become a sample (no turns, nothing fits `max_seq_len`)."""

    http_status = 422


class UnknownResponseIdError(TitoError):
    """`rewards` names a response id that no turn of the session has."""

    http_status = 400

    def __init__(self, session_id: str, unknown: Sequence[str], known: Sequence[str]) -> None:
        self.unknown = tuple(unknown)
        shown = ", ".join(known[:8]) + (", ..." if len(known) > 8 else "")
        super().__init__(
            f"rewards: response id(s) {', '.join(map(repr, unknown))} name no turn of session {session_id}; "
            f"its turns' response ids are: {shown or 'none'} (the `id` of each reply)"
        )


@dataclass(frozen=True)
class TurnSpan:
    """One turn of a sample: where its ids lie in `tokens`, and how they were sampled."""

    node_id: int
    response_id: str
    """The id tito replied with for this turn (`chatcmpl-...`, or the dialect's own): what `rewards` keys name."""
    prompt_start: int
    """`tokens[prompt_start:start]` are the ids this turn appended (junction, messages, generation prompt)."""
    start: int
    end: int
    """`tokens[start:end]` are the ids the engine sampled in this turn (shorter only where a later turn's junction
    dropped a trailing stop id)."""
    appended_messages: int
    """How many messages the request appended before this turn's reply."""
    finish_reason: str
    weight_version: str | None
    """The last weight version the engine reported for the turn; None where the engine reports none."""
    weight_versions: tuple[str, ...]
    """Every version the engine reported while sampling the turn, in order (more than one: updated mid-turn)."""
    temperature: float | None
    sampling: Mapping[str, Any]
    """The sampling parameters the engine got (temperature, top_p, top_k, max_new_tokens, stop, seed, ...)."""
    request_timestamp: float | None
    """Wall-clock time (time.time()) the turn's request reached tito; None in journals written before it was kept."""
    completion_timestamp: float
    """Wall-clock time the turn was committed."""
    reward: float | None = None
    """The reward posted for this turn's response id, if any."""
    messages: tuple[Message, ...] = ()
    """The messages the turn's request appended (its ids are `tokens[prompt_start:start]`), as stored: what a
    trainer that reads conversations (verifiers' Trace, NeMo Gym's items) gets. Empty in samples decoded from
    payloads written before they were kept."""
    assistant: Message | None = None
    """The parsed reply the agent received for this turn (its ids are `tokens[start:end]`)."""


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
    spans: tuple[TurnSpan, ...] = ()
    """One per turn on the sample's path, root first; they tile `tokens` in order."""
    group_id: str | None = None
    """The group GRPO-style trainers normalise rewards in (one prompt's rollouts): the session's, or the one posted
    with the samples request."""
    conversation: Mapping[str, Any] | None = None
    """The episode's conversation the sample comes from (`ConversationInfo.as_json`: id, kind main/subagent/side/
    compaction, parent, spawned_by, inferred, ...); None for a trajectory assembled outside a session."""


def assemble_sample(
    session_id: str,
    sequence: PathSequence,
    turns: Sequence[TurnCommitted],
    max_seq_len: int | None = None,
    reward: float | None = None,
    metadata: Mapping[str, Any] | None = None,
    rewards: Mapping[str, float] | None = None,
    group_id: str | None = None,
    conversation: Mapping[str, Any] | None = None,
    budgets: Budgets | None = None,
) -> Sample:
    """The sample of one path: `sequence` from `NodeStore.path_sequence`, `turns` the path's turns, root first.

    `metadata` is the agent's (with any server facts already over it); the reward is `rewards` at the last kept
    turn's response id, else `reward`."""
    if not turns or not sequence.spans:
        raise SampleAssemblyError(f"session {session_id} has no committed turns to assemble a sample from")
    by_node = {turn.node_id: turn for turn in turns}
    spans = list(sequence.spans)
    kept = _turns_within(session_id, spans, max_seq_len, budgets or Budgets())
    end = spans[kept - 1].end
    start = spans[0].start
    kept_turns = [by_node[span.node_id] for span in spans[:kept]]
    last_turn = kept_turns[-1]
    status = _STATUS_BY_FINISH.get(last_turn.finish_reason, "aborted")
    if kept < len(spans):
        status = "truncated"
    owned: dict[str, Any] = {
        "session_id": session_id,
        "num_turns": kept,
        "truncated_turns": len(spans) - kept,
        "turns": [_turn_facts(turn) for turn in kept_turns],
    }
    merged = _fold(kept_turns)
    merged.update((key, value) for key, value in (metadata or {}).items() if key not in SERVER_OWNED_KEYS)
    merged.update(owned)
    by_response = rewards or {}
    return Sample(
        tokens=sequence.tokens[:end],
        loss_mask=sequence.loss_mask[:end],
        rollout_logprobs=sequence.logprobs[:end],
        response_length=end - start,
        status=status,
        reward=by_response.get(last_turn.response_id, reward),
        metadata=merged,
        spans=tuple(_turn_span(span, turn, by_response) for span, turn in zip(spans[:kept], kept_turns, strict=True)),
        group_id=group_id,
        conversation=conversation,
    )


@dataclass(frozen=True)
class Budgets:
    """A trainer's token budgets (verl's `rollout.prompt_length` and `response_length`): ids before the first
    sampled id, and from it to the end. None: no budget."""

    prompt_length: int | None = None
    response_length: int | None = None


def _turns_within(session_id: str, spans: Sequence[SampledSpan], max_seq_len: int | None, budgets: Budgets) -> int:
    """How many whole turns fit `max_seq_len` and the budgets; SampleAssemblyError (422) when none does, or when
    the prompt alone is over its budget."""
    prompt = spans[0].start
    if budgets.prompt_length is not None and prompt > budgets.prompt_length:
        raise SampleAssemblyError(
            f"session {session_id}: its prompt is {prompt} tokens, over prompt_length={budgets.prompt_length} "
            f"(a prompt cannot be cut: raise the trainer's prompt budget or shorten the first request)"
        )
    limits = [(name, limit, offset) for name, limit, offset in
              (("max_seq_len", max_seq_len, 0), ("response_length", budgets.response_length, prompt))
              if limit is not None]  # fmt: skip
    kept = len(spans)
    for name, limit, offset in limits:
        fits = sum(1 for span in spans if span.end - offset <= limit)
        if fits == 0:
            raise SampleAssemblyError(
                f"session {session_id}: {name}={limit} is shorter than the first turn ({spans[0].end - offset} "
                f"tokens{': prompt and reply' if offset == 0 else ' of reply'}), so no whole turn fits"
            )
        kept = min(kept, fits)
    return kept


def _turn_span(span: SampledSpan, turn: TurnCommitted, rewards: Mapping[str, float]) -> TurnSpan:
    facts = turn.metadata
    versions = tuple(str(version) for version in facts.get("weight_versions") or ())
    sampling = dict(facts.get("sampling") or {})
    return TurnSpan(
        node_id=turn.node_id,
        response_id=turn.response_id,
        prompt_start=span.prompt_start,
        start=span.start,
        end=span.end,
        appended_messages=len(turn.request_messages),
        finish_reason=turn.finish_reason,
        weight_version=versions[-1] if versions else None,
        weight_versions=versions,
        temperature=as_number(sampling.get("temperature")),
        sampling=sampling,
        request_timestamp=as_number(facts.get(_REQUESTED_AT)),
        completion_timestamp=turn.at,
        reward=rewards.get(turn.response_id),
        messages=tuple(turn.request_messages),
        assistant=turn.assistant,
    )


def _turn_facts(turn: TurnCommitted) -> dict[str, Any]:
    """A turn's metadata for `metadata.turns`; its wall-clock request time is the span's `request_timestamp`
    (kept out here, so two runs of one session have equal metadata)."""
    facts = {key: value for key, value in turn.metadata.items() if key != _REQUESTED_AT}
    return {"node_id": turn.node_id, "finish_reason": turn.finish_reason, **facts}


def _fold(turns: Sequence[TurnCommitted]) -> dict[str, Any]:
    """The lowest metadata layer: `FOLDED_KEYS` folded over the sample's turns."""
    versions = merged_versions(turn.metadata.get("weight_versions") or () for turn in turns)
    cached = sum(int(turn.metadata.get("cached_tokens") or 0) for turn in turns)
    return {"weight_versions": versions, "cached_tokens": cached}


def merged_versions(per_turn: Iterable[Iterable[Any]]) -> list[str]:
    """The weight versions of consecutive turns as one list, in order, a version continued across turns once."""
    versions: list[str] = []
    for turn_versions in per_turn:
        for version in map(str, turn_versions):
            if not versions or versions[-1] != version:
                versions.append(version)
    return versions


def as_number(value: Any) -> float | None:
    """A JSON number as a float; None for anything else (booleans included)."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def session_samples(
    session_id: str,
    trajectory: Trajectory,
    max_seq_len: int | None = None,
    reward: float | None = None,
    metadata: Mapping[str, Any] | None = None,
    rewards: Mapping[str, float] | None = None,
    group_id: str | None = None,
    kinds: Collection[str] | None = None,
    budgets: Budgets | None = None,
) -> list[Sample]:
    """Every sample of a session: per conversation of an episode (opening order), one per path its trajectory
    picks (linear: its one path; tree: one per leaf the picker keeps, each node trained once), then that
    trajectory's post-processor; each sample labelled with its conversation. `kinds`: only conversations of these
    kinds (None: every conversation). What `/samples` replies and `tito journal export` writes, so both give the
    same bytes. Raises UnknownResponseIdError (400) when `rewards` names a response id no kept turn has,
    SampleAssemblyError (422) when there is nothing to assemble, SampleHookError (422) when a picker or
    post-processor breaks its contract."""
    turns = {node.node_id: node.turn for node in trajectory.store}
    if rewards:
        known = [turn.response_id for turn in turns.values()]
        known_set = set(known)
        unknown = [response_id for response_id in rewards if response_id not in known_set]
        if unknown:
            raise UnknownResponseIdError(session_id, unknown, known)
    parts: list[tuple[Trajectory, Mapping[str, Any] | None]] = [(trajectory, None)]
    if isinstance(trajectory, Episode):
        infos = trajectory.conversation_infos()
        parts = [
            (conversation.trajectory, infos[conversation_id].as_json())
            for conversation_id, conversation in trajectory.conversations.items()
            if kinds is None or infos[conversation_id].kind in kinds
        ]
    built: list[Sample] = []
    assembled = 0
    for part, conversation in parts:
        samples = [
            assemble_sample(
                session_id,
                sequence,
                [turns[span.node_id] for span in sequence.spans],
                max_seq_len,
                reward,
                metadata,
                rewards,
                group_id,
                conversation,
                budgets,
            )
            for sequence in part.sample_sequences()
        ]
        assembled += len(samples)
        built += part.postprocess_samples(samples)
    if not assembled:  # a post-processor may keep none of what was assembled (a filter): an empty list then
        if len(trajectory.store) == 0:
            problem = "no committed turns"
        elif kinds is not None and not any(part.sample_sequences() for part, _ in parts):
            problem = f"no conversation of kind {', '.join(sorted(kinds))}"
        else:
            problem = "no leaf that the sample picker keeps"
        raise SampleAssemblyError(f"session {session_id} has {problem} to assemble a sample from")
    return built


def requested_samples(
    session_id: str,
    trajectory: Trajectory,
    asked: Mapping[str, Any],
    server_metadata: Mapping[str, Any],
    session_group_id: str | None = None,
) -> list[Sample]:
    """The samples a `/samples` body asks for: `asked` is that body as JSON (what the journal keeps with the
    session's `SamplesTaken`, so `tito journal export` gives the same samples). `server_metadata` (the engine's
    name, ...) wins over the agent's keys of that name; the reward falls back to the agent's `metadata["reward"]`,
    the group to the session's."""
    agent_metadata = asked.get("metadata") or {}
    return session_samples(
        session_id,
        trajectory,
        asked.get("max_seq_len"),
        posted_reward(asked),
        {**agent_metadata, **server_metadata},
        asked.get("rewards"),
        asked.get("group_id") or session_group_id,
        asked.get("conversation_kinds"),
        Budgets(asked.get("prompt_length"), asked.get("response_length")),
    )


def posted_reward(asked: Mapping[str, Any]) -> float | None:
    """The scalar reward a samples body posts: its `reward`, else `metadata["reward"]` when a number."""
    reward = asked.get("reward")
    return as_number((asked.get("metadata") or {}).get("reward")) if reward is None else float(reward)
