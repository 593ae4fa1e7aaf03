"""The events that change a session, as frozen values: the only way state changes, live or on replay.

The server builds an event, the journal persists it (when enabled) and the trajectory applies it; a restarted
server replays the journal's events through the same `apply`, so live and replayed sessions cannot differ.
Ids and logprobs are compact arrays (`array('i')`, `array('f')`), never lists of Python numbers.

Imports nothing from tito but chat_message.
"""

from __future__ import annotations

import enum
import operator
from array import array
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tito.chat_message import Message as Message  # re-exported: the modules that read messages from here

Frozen = TypeVar("Frozen")


def with_changes(value: Frozen, **changes: Any) -> Frozen:
    """A copy of a frozen event or plan with `changes`: `dataclasses.replace` for the per-turn path.

    `dataclasses.replace` reads every field and runs `__init__` again, one frozen `__setattr__` per field (4.5 us
    for a `TurnCommitted`, and a turn makes four or five such copies); these values check nothing at
    construction, so copying the instance's fields and setting the changed ones is the same value."""
    fields_held = getattr(value, "__dict__", None)
    if fields_held is None:
        return _with_slot_changes(value, changes)
    if not changes.keys() <= fields_held.keys():
        raise TypeError(f"{type(value).__name__} has no field {sorted(changes.keys() - fields_held.keys())}")
    copy = object.__new__(type(value))
    copy.__dict__.update(fields_held)
    copy.__dict__.update(changes)
    return copy


def _with_slot_changes(value: Frozen, changes: dict[str, Any]) -> Frozen:
    """`with_changes` for a class with `__slots__` of its own, no slotted base (what is stored per turn): every field
    read in one C call and set through its slot, past the frozen `__setattr__` (~1.8 us for a `TurnCommitted`)."""
    kind = type(value)
    access = _slot_access.get(kind)
    if access is None:
        names: tuple[str, ...] = vars(kind)["__slots__"]
        access = _slot_access[kind] = operator.attrgetter(*names), {name: vars(kind)[name].__set__ for name in names}
    read, setters = access
    if not changes.keys() <= setters.keys():
        raise TypeError(f"{kind.__name__} has no field {sorted(changes.keys() - setters.keys())}")
    copy: Frozen = object.__new__(kind)
    for set_slot, held in zip(setters.values(), read(value), strict=True):
        set_slot(copy, held)
    for name, changed in changes.items():
        setters[name](copy, changed)
    return copy


_slot_access: dict[type, tuple[Callable[[Any], tuple[Any, ...]], dict[str, Callable[[Any, Any], None]]]] = {}
"""A slotted class -> the reader of all its fields (in slot order) and each slot's setter, made at its first copy."""


class TrajectoryKind(enum.Enum):
    LINEAR = "linear"
    """One path: an extension appends, a one-step retry replaces the last turn, deeper divergence is refused."""
    TREE = "tree"
    """Every generation is kept: a request attaches at its deepest matching node; divergence grows a branch."""


@dataclass(frozen=True)
class SessionConfig:
    """What a session was created with; enough to rebuild it on replay (the server's launch options give the rest)."""

    trajectory: TrajectoryKind = TrajectoryKind.LINEAR
    chat_template_kwargs: Mapping[str, Any] = field(default_factory=dict)
    allowed_append_roles: tuple[str, ...] | None = None
    """None: every role the family supports."""
    max_nodes: int | None = None
    """Tree sessions: the most committed generations kept; checked before the engine is called."""
    strict_append_only: bool = False
    """Tree sessions: refuse any branch shape (400) instead of growing one."""
    sample_picker: str | None = None
    """Tree sessions: `module:function` choosing the leaves that become samples; None: drop superseded retries."""
    sample_postprocessor: str | None = None
    """Tree sessions: `module:function` run on the assembled samples; None: none."""
    ttl_seconds: float | None = None
    """Idle time after which the session is evicted; None: never."""
    matcher: str = "strict"
    """The matching policy a resent conversation is checked with (`tito.matching.MATCHING_POLICIES`): `strict`, or
    `harness` (what agent frameworks drop or reformat still attaches). `tito serve` defaults to `harness`."""
    group_id: str | None = None
    """Carried on every sample (GRPO-style trainers group one prompt's sessions by it); None: no group."""
    hosted_tools: str = "drop"
    """What a Responses request's hosted tools (`web_search`, ...; a model behind tito cannot call them) get: `drop`
    (left out of the prompt, recorded on the turn) or `refuse` (a 400)."""


@dataclass(frozen=True)
class SessionCreated:
    session_id: str
    config: SessionConfig
    at: float
    """Wall-clock time (time.time()): TTL clocks survive a restart."""


CONVERSATION_KINDS = ("main", "subagent", "side", "compaction")
"""What a conversation of an episode is: the agent's main loop, a sub-agent it spawned, a side request (a title,
a summary, a classifier call) or a compaction (the request that summarises a conversation)."""
FIRST_CONVERSATION = "c0"
"""The id of a session's first conversation (and of every turn journaled before sessions held conversations)."""


@dataclass(frozen=True)
class ConversationOpening:
    """What the first turn of a conversation records about it: the lineage the agent stated, or how tito inferred
    that the request opens a new conversation. Kind, parent and spawning tool call are derived from these facts
    (`tito.trajectory.episode`), so live and replayed sessions label conversations alike."""

    source: str
    """Who said this is a new conversation: `x-tito-conversation`, `codex`, `claude-code` (lineage headers), or
    `prefix` (inferred: the request resent no stored conversation's opening)."""
    key: str | None = None
    """The stated conversation key (a thread or agent id, the X-Tito-Conversation value); None when inferred."""
    kind: str | None = None
    """The kind the agent stated (`CONVERSATION_KINDS`); None: inferred."""
    parent_key: str | None = None
    """The stated key of the parent conversation (a sub-agent's spawner, a compaction's subject)."""
    spawned_by: str | None = None
    """The tool call id that spawned it, where stated."""
    continues: str | None = None
    """The conversation id this one continues (after a compaction, or a stated conversation whose history was
    replaced)."""
    compaction: str | None = None
    """The compaction conversation whose summary this one continues from."""
    forked_from: int | None = None
    """The node whose reply this request left out and replaced with its own (a compaction), or resent rewritten (with
    `continues`: a framework that rewrites history): the node stays in its own conversation; this one forks from the
    conversation holding it."""
    has_tools: bool = False
    """The opening request sent tools."""
    structured_output: bool = False
    """The opening request asked for structured output (a json schema): a title or classifier call."""


@dataclass(frozen=True, slots=True)
class TurnCommitted:
    """One committed generation: a new node below `parent_id` (None: a new root).

    Slotted: a session keeps one per turn, ~150 bytes so, against ~350 with an attribute dict (issue 34).

    The node's full prompt is `path_ids(parent_id)[:kept_parent_ids] + prompt_ids`; its ids are that prompt plus
    `output_ids`. Only `output_ids` are engine-sampled (loss mask 1); `prompt_ids` (junction, appended messages,
    client-written assistants, the generation prompt) are prompt (loss mask 0).
    """

    session_id: str
    node_id: int
    """Assigned by the trajectory in commit order (0, 1, 2, ...), never reused within a session."""
    parent_id: int | None
    kept_parent_ids: int
    """How many of the parent path's ids the prompt keeps (the junction may drop a trailing stop token)."""
    request_messages: tuple[Message, ...]
    """The request's messages beyond the parent's path (for a root: all of them), normalised as stored."""
    tools: tuple[Message, ...] | None
    """The request's tools (a root's; later turns must send the same)."""
    prompt_ids: array[int]
    output_ids: array[int]
    output_logprobs: array[float]
    assistant: Message
    """The parsed assistant message the agent received (and will echo back)."""
    finish_reason: str
    """OpenAI's: `stop`, `length`, `tool_calls`."""
    response_id: str
    """The id of the reply the agent got (`chatcmpl-...` or its dialect's own): what samples' `rewards` keys name."""
    request_fingerprint: str
    """Digest of the request body: an SDK retry of a committed request returns this turn instead of sampling."""
    metadata: Mapping[str, Any]
    """Per-turn facts for the sample: engine finish, timings, cached tokens, weight versions, sampling parameters,
    invalid tool calls, the engine's logprob semantics, `requested_at` (wall-clock). JSON-serialisable."""
    at: float
    conversation_id: str = FIRST_CONVERSATION
    """The conversation of the episode the turn belongs to (ids follow opening order: c0, c1, ...)."""
    opening: ConversationOpening | None = None
    """Set on the turn that opened its conversation: what is known about the conversation."""


@dataclass(frozen=True)
class SamplesTaken:
    session_id: str
    at: float
    request: Mapping[str, Any] = field(default_factory=dict)
    """The `/samples` body's given fields as JSON (rewards, group, max_seq_len, budgets, format, metadata): what
    `tito journal export` replays so its samples equal the reply's. Empty in journals written before it was kept."""


@dataclass(frozen=True)
class SessionDeleted:
    session_id: str
    at: float
    reason: str = "deleted"
    """`deleted` by the client, or `expired` by the TTL."""


SessionEvent = SessionCreated | TurnCommitted | SamplesTaken | SessionDeleted
