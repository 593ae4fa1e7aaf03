"""The trajectory interface both linear and tree sessions implement, and the node they store.

A turn is planned (where does the request attach, what does it append; no mutation), the engine is called
with no lock held, and then the turn is committed by applying a `TurnCommitted` event, after `check` confirms
under the session lock that the plan still holds (linear: nobody else committed meanwhile).

Imports nothing from tito but errors, matching, path_ids, trajectory.events and trajectory.nodes.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from tito.matching import ResendMatch
from tito.path_ids import PathIds
from tito.trajectory.events import ConversationOpening, Message, SessionConfig, TurnCommitted
from tito.trajectory.nodes import Node, PathSequence

T = TypeVar("T")


@dataclass(frozen=True)
class TurnPlan:
    """Where a request attaches and what it appends: the input of `TitoTokenizer.merge_tokens`."""

    parent_id: int | None
    """The node the request extends; None: it starts a new root (first turn, or a new opening in a tree)."""
    stored_messages: Sequence[Message]
    """The parent path's messages (what the request must resend unchanged)."""
    stored_ids: PathIds
    """The parent path's ids (prompt + sampled), verbatim, as the nodes' arrays that hold them."""
    new_messages: Sequence[Message]
    """The stored messages verbatim, then `appended` (merge_tokens takes old and new lists): what the agent dropped
    or reformatted in its resend never reaches the render."""
    appended: Sequence[Message]
    """The messages beyond the parent path, tool-call ids the agent re-generated mapped back to the stored ones:
    they become `TurnCommitted.request_messages`."""
    version: int
    """The trajectory's version when planned: `check` refuses the commit if a linear session moved on."""
    replaces: int | None = None
    """Linear one-step retry: the node this turn supersedes (it and its descendants leave the path)."""
    idempotent_reply: TurnCommitted | None = None
    """An SDK retry of a committed request: reply with this turn instead of sampling again."""
    resend: ResendMatch | None = None
    """How the request resent the parent path's messages (the rules the session's policy needed); None: nothing
    was stored before it (a session's first turn) or it is an SDK retry."""
    branched: bool = False
    """The request left the stored conversation: a linear retry that replaces the head, or a tree branch (below a
    node that already has children, or a new root beside existing ones)."""
    conversation: str | None = None
    """The episode's conversation the turn extends (`tito.trajectory.episode`); None: it opens a new one."""
    opening: ConversationOpening | None = None
    """When the turn opens a conversation: what is known of it (its id is minted when the turn commits)."""


class NodeReader(Protocol):
    """What readers use of a trajectory's nodes: a `NodeStore`, or an episode's view over its conversations'."""

    def __len__(self) -> int: ...
    def __contains__(self, node_id: object) -> bool: ...
    def __iter__(self) -> Iterator[Node]: ...
    @property
    def next_node_id(self) -> int: ...
    @property
    def roots(self) -> tuple[int, ...]: ...
    def get(self, node_id: int) -> Node: ...
    def path(self, node_id: int) -> list[Node]: ...
    def path_messages(self, node_id: int) -> list[Message]: ...
    def path_length(self, node_id: int) -> int: ...
    def path_ids(self, node_id: int) -> array[int]: ...
    def path_sequence(self, node_id: int) -> PathSequence: ...
    def leaves(self) -> list[int]: ...


class Trajectory(Protocol):
    """One session's committed generations. Mutated only by `apply`."""

    config: SessionConfig

    @property
    def store(self) -> NodeReader: ...

    def plan(
        self, messages: Sequence[Message], tools: Sequence[Message] | None, fingerprint: str, is_retry: bool
    ) -> TurnPlan:
        """Where `messages` attach; raises AppendOnlyError (400, where it diverged), TruncatedTurnError (409, extends a
        length-cut turn), a capacity error (max nodes). The role gate runs in merge_tokens. Mutates nothing."""
        ...

    def check(self, plan: TurnPlan) -> None:
        """Under the session lock, right before commit: raise a conflict (409) if the plan no longer holds."""
        ...

    def apply(self, event: TurnCommitted) -> None:
        """Add the committed node (and, linear, drop what it replaces). The one mutator, live and on replay."""
        ...

    def path_ids(self, node_id: int) -> array[int]:
        """The node's ids: its full prompt then its sampled ids."""
        ...

    def sample_sequences(self) -> list[PathSequence]:
        """The path sequences that become samples: linear, its one path; tree, one per kept leaf (the picker
        applied, a node shared by several kept leaves trained once: loss mask 0 on it in all but the earliest)."""
        ...

    def postprocess_samples(self, samples: Sequence[T]) -> list[T]:
        """The samples assembled from `sample_sequences()`, after the session's post-processor (tree sessions with
        `--sample-postprocessor`; otherwise unchanged)."""
        ...

    def describe(self) -> Mapping[str, Any]:
        """JSON for `GET /sessions/{id}`: turns or nodes, token counts, leaves, the active path."""
        ...
