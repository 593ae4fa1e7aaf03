"""Linear sessions: one path of turns; an extension appends, a one-step retry replaces the last turn.

Everything derives from the `TurnCommitted` events: a turn whose parent is the head's parent is a one-step
retry (the head leaves the path), so replaying the events rebuilds the same path with no rollback event.
The head path's messages and nodes (references) are kept beside the node store so a turn never re-walks the
history; its ids are not: a turn gets the nodes' own arrays (references kept in order, `tito.path_ids.PathIds`), so
each id is stored once and written once more per turn, into the prompt.

Imports nothing from tito but errors, matching, path_ids, trajectory.base, trajectory.events, trajectory.nodes and
trajectory.shared_values.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn, TypeVar

from tito.errors import AppendOnlyError, TitoError, TruncatedTurnError
from tito.matching import MatchingPolicy, ResendMatch, appended_messages, matching_policy
from tito.path_ids import IdParts, PathIds, joined_ids
from tito.trajectory.base import TurnPlan
from tito.trajectory.events import Message, SessionConfig, TurnCommitted
from tito.trajectory.nodes import (
    Node,
    NodeStore,
    PathSequence,
    TrajectoryIntegrityError,
    extend_parts,
    path_parts,
)
from tito.trajectory.shared_values import SHARED

T = TypeVar("T")


class SessionMovedOnError(TitoError):
    """Another request committed a turn on this conversation while this one was generating: it is not recorded."""

    http_status = 409


class ToolsChangedError(TitoError):
    """A later turn sent other tools than the session's first turn: the stored prompt rendered the first ones."""

    http_status = 400


class LinearTrajectory:
    """One path of committed turns (the `Trajectory` protocol), mutated only by `apply`."""

    def __init__(self, config: SessionConfig) -> None:
        self.config = config
        self.store = NodeStore()
        self.matcher: MatchingPolicy = matching_policy(config.matcher)
        self.version = 0
        """Bumped by every applied turn: a plan made at another version no longer holds."""
        self._head: int | None = None
        self._messages: list[Message] = []
        """The head path's messages (stored once per node; this list holds references)."""
        self._path: list[Node] = []
        """The head path's nodes, root first (references)."""
        self._parts: IdParts = []
        """The head path's ids as its nodes' arrays (references, `tito.trajectory.nodes.path_parts`): a turn's plan
        hands them over as they are; never a second copy of the ids."""
        self._turn_starts: list[int] = []
        """Per node on the path: the index of its first request message."""
        self._resent: list[Message] = []
        """Messages requests resent, each equal (`==`) to the stored message at its index (a prefix of them): a
        request that resends those very objects again (the resent-prefix reader reuses them turn to turn, and puts
        the stored reply itself in place of a resend equal to it as JSON) is compared there by identity, not
        deeply."""

    @property
    def head(self) -> int | None:
        return self._head

    def plan(
        self, messages: Sequence[Message], tools: Sequence[Message] | None, fingerprint: str, is_retry: bool
    ) -> TurnPlan:
        head = self._head
        if head is None:
            return TurnPlan(None, (), PathIds(), messages, messages, self.version)
        head_turn = self.store.get(head).turn
        if is_retry and head_turn.request_fingerprint == fingerprint:
            return TurnPlan(head_turn.parent_id, (), PathIds(), messages, (), self.version, None, head_turn)
        stored = self._messages
        found = ResendMatch()
        diverged = self._first_difference(stored, messages, found)
        if diverged is None:
            self._check_tools(tools, found)
            if head_turn.finish_reason == "length":
                raise TruncatedTurnError(head, head_turn.response_id)
            appended = found.restore_call_ids(messages[len(stored) :])
            stored_ids = PathIds(self._parts, self._path[-1].path_length)
            return TurnPlan(head, tuple(stored), stored_ids, [*stored, *appended], appended, self.version, resend=found)
        head_start = self._turn_starts[-1]
        if diverged < head_start:
            self._refuse_deep_divergence(stored, messages, diverged)
        if diverged == len(stored) - 1 and len(messages) > diverged and messages[diverged].get("role") == "assistant":
            self._refuse_rewritten_reply(stored, messages)
        parent = head_turn.parent_id
        if parent is not None:
            self._check_tools(tools, found)
        parent_ids = PathIds() if parent is None else PathIds(path_parts(self._path[:-1]), self._path[-2].path_length)
        kept, appended = stored[:head_start], found.restore_call_ids(messages[head_start:])
        return TurnPlan(
            parent, kept, parent_ids, [*kept, *appended], appended, self.version, replaces=head, resend=found,
            branched=True,
        )  # fmt: skip

    def _check_tools(self, tools: Sequence[Message] | None, found: ResendMatch) -> None:
        """Tools render in the opening system block, so a turn that keeps the stored ids keeps the first tools.
        Under `harness`, a request that leaves its tools out (autogen's reflection call) keeps the stored ones: the
        `tools_omitted` rule."""
        first = self.store.get(self.store.roots[0]).turn.tools
        if not tools and first and self.matcher.name == "harness":
            found.rules.add("tools_omitted")
            return
        if tools and SHARED.held_tuple(tools) is first:
            return  # the held tools the first turn stored: equal, found without comparing them
        if list(tools or ()) != list(first or ()):
            names = ", ".join(str((tool.get("function") or {}).get("name")) for tool in (first or ())) or "none"
            raise ToolsChangedError(
                f"the request's tools differ from the ones this session's first turn rendered ({names}); tools are "
                "part of the stored prompt, so send the same tools or open a new session"
            )

    def _first_difference(self, stored: Sequence[Message], sent: Sequence[Message], found: ResendMatch) -> int | None:
        """The first stored message the request does not resend (under the session's matcher, recording into
        `found` what it needed); None when it extends them all."""
        if len(sent) >= len(stored) and self._resends_all(stored, sent):
            return None
        difference = self.matcher.match_prefix(stored, sent, found)
        return None if difference is None else difference[0]

    def _resends_all(self, stored: Sequence[Message], sent: Sequence[Message]) -> bool:
        """Whether `sent` begins with messages equal to all the stored ones: where it repeats `_resent`, equal to
        them as those are (`==` is transitive on JSON values), beyond it compared, then known for the next turn."""
        known = len(self._resent)
        if list(sent[:known]) != self._resent or list(sent[known : len(stored)]) != stored[known:]:
            return False
        self._resent.extend(sent[known : len(stored)])
        return True

    def _refuse_deep_divergence(self, stored: Sequence[Message], sent: Sequence[Message], index: int) -> NoReturn:
        turns_after = sum(start > index for start in self._turn_starts) + 1
        self._refuse(
            stored,
            sent,
            f"a linear session rolls back at most one generated turn, and this request would discard {turns_after}; "
            "resend the stored conversation (GET /sessions/{id} shows it) or open a new session",
        )

    def _refuse_rewritten_reply(self, stored: Sequence[Message], sent: Sequence[Message]) -> NoReturn:
        """The agent sent back the generated reply changed: refused, never silently taken as a retry that would
        discard the sampled turn (a harness that re-serialises tool arguments must not lose training data)."""
        self._refuse(
            stored,
            sent,
            "this is the assistant reply the model generated; send it back exactly as received (e.g. "
            "message.model_dump(exclude_none=True)), or resend the conversation without it to retry that turn",
        )

    def _refuse(self, stored: Sequence[Message], sent: Sequence[Message], hint: str) -> NoReturn:
        """Raise the matcher's account of the first difference (message index, field, both values) with `hint`."""
        try:
            appended_messages(stored, sent[: len(stored)], (), self.matcher)
        except AppendOnlyError as exc:
            raise AppendOnlyError(exc.index, exc.field, exc.expected, exc.actual, hint) from None
        raise TrajectoryIntegrityError("the request was found to diverge, but the matcher finds no difference")

    def check(self, plan: TurnPlan) -> None:
        if plan.version != self.version:
            raise SessionMovedOnError(
                "another request extending the same conversation committed a turn while this one was generating; "
                "this reply was not recorded: resend the conversation as it now stands (one request at a time per "
                "conversation; other conversations of the session may run at the same time)"
            )

    def apply(self, event: TurnCommitted) -> None:
        head = self._head
        if event.parent_id != head:
            if head is None or event.parent_id != self.store.get(head).parent_id:
                raise TrajectoryIntegrityError(
                    f"turn {event.node_id} attaches below {event.parent_id}, but a linear session can only extend "
                    f"its head ({head}) or retry it (attach below {head and self.store.get(head).parent_id})"
                )
            self.store.remove_subtree(head)
            del self._messages[self._turn_starts.pop() :]
            del self._resent[len(self._messages) :]
            self._path.pop()
            self._parts = path_parts(self._path)
        node = self.store.add(event)
        extend_parts(self._parts, self._path[-1].path_length if self._path else 0, node)
        self._path.append(node)
        self._turn_starts.append(len(self._messages))
        self._messages.extend(event.request_messages)
        self._messages.append(event.assistant)
        self._head = event.node_id
        self.version += 1

    def path_ids(self, node_id: int) -> array[int]:
        return joined_ids(self._parts) if node_id == self._head else self.store.path_ids(node_id)

    def messages(self) -> list[Message]:
        """The head path's conversation (a copy)."""
        return list(self._messages)

    def sample_sequences(self) -> list[PathSequence]:
        return [] if self._head is None else [self.store.path_sequence(self._head)]

    def postprocess_samples(self, samples: Sequence[T]) -> list[T]:
        """Linear sessions have no post-processor: the one sample as assembled."""
        return list(samples)

    def turns(self) -> list[TurnCommitted]:
        """The committed turns on the path, first to last."""
        return [node.turn for node in self._path]

    def describe(self) -> Mapping[str, Any]:
        turns = self.turns()
        return {
            "trajectory": "linear",
            "turns": [
                {
                    "node_id": turn.node_id,
                    "response_id": turn.response_id,
                    "finish_reason": turn.finish_reason,
                    "appended_messages": len(turn.request_messages),
                    "prompt_tokens": int(turn.metadata.get("prompt_tokens", 0)),
                    "completion_tokens": len(turn.output_ids),
                }
                for turn in turns
            ],
            "messages": len(self._messages),
            "conversation": list(self._messages),
            "tokens": self._path[-1].path_length if self._path else 0,
            "sampled_tokens": sum(len(turn.output_ids) for turn in turns),
        }
