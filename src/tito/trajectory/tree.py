"""Tree sessions: every generation is kept; a request attaches at its deepest matching node, divergence branches.

Retries, re-asks from an earlier point, parallel sub-agents and compaction all become branches of one forest
instead of refused or discarded turns; the picker (`tito.trajectory.picking`) decides which leaves become samples.

Finding the attach point walks the forest from the roots like a trie: below a matched node, the children whose
assistant has the request's match key (the session's matching policy's) at the right offset are looked up (not
compared one by one), and only they are compared; a request costs about one comparison per message on its path,
whatever the tree's size or fan-out.

Imports nothing from tito but errors, matching, path_ids and trajectory.
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, TypeVar

from tito.errors import AppendOnlyError, TitoError, TruncatedTurnError
from tito.matching import MatchingPolicy, ResendMatch, match_resend, matching_policy
from tito.path_ids import PathIds
from tito.trajectory.base import TurnPlan
from tito.trajectory.events import Message, SessionConfig, TurnCommitted
from tito.trajectory.nodes import NodeStore, PathSequence
from tito.trajectory.picking import (
    SamplePicker,
    SamplePostprocessor,
    TreeView,
    drop_superseded_retries,
    load_hook,
    pick_leaves,
    postprocess,
    train_each_node_once,
)

T = TypeVar("T")


class TreeCapacityError(TitoError):
    """The session holds its maximum number of nodes; raised before the engine is called.

    409, not 429: waiting does not help, the session is full for good (take its samples and start a new one).
    """

    http_status = 409

    def __init__(self, max_nodes: int) -> None:
        self.max_nodes = max_nodes
        super().__init__(
            f"this tree session already holds its maximum of {max_nodes} nodes (--max-nodes); take its samples and "
            "start a new session"
        )


class StrictAppendOnlyError(AppendOnlyError):
    """A strict append-only tree session refused a request that would branch (400, where it diverged)."""


class ConcurrentBranchError(TitoError):
    """Strict append-only: another turn committed while this one was generating, so committing it would branch."""

    http_status = 409


class TreeTrajectory:
    """One tree session: a forest of committed generations, mutated only by `apply`."""

    def __init__(self, config: SessionConfig) -> None:
        self.config = config
        self.store = NodeStore()
        self.matcher: MatchingPolicy = matching_policy(config.matcher)
        self._children_by_reply: dict[int | None, dict[int, dict[Hashable, list[int]]]] = {}
        """Each node's children (None: the roots) by how many request messages they add, then by their assistant's
        match key: finding the attach point looks siblings up instead of comparing each one."""
        self._latest_id: int | None = None
        """The most recent commit: always a leaf (a child commits after its parent), the end of the active path."""
        self._latest_by_fingerprint: dict[str, int] = {}
        """The latest node committed for each request fingerprint: an SDK retry's reply."""
        self._picker_name = config.sample_picker or "default picker (drop superseded retries)"
        self._picker: SamplePicker = (
            load_hook(config.sample_picker, "--sample-picker") if config.sample_picker else drop_superseded_retries
        )
        self._postprocessor: SamplePostprocessor | None = (
            load_hook(config.sample_postprocessor, "--sample-postprocessor") if config.sample_postprocessor else None
        )

    def plan(
        self, messages: Sequence[Message], tools: Sequence[Message] | None, fingerprint: str, is_retry: bool
    ) -> TurnPlan:
        """Attach `messages` at the deepest node whose whole path they resend (ties: the latest commit).

        An SDK retry (`is_retry`) of a request already committed gets that turn back instead of a new sample. Call
        under the session lock: then a retry planned after the first request committed always finds its turn.
        """
        twin = self._latest_by_fingerprint.get(fingerprint) if is_retry else None
        if twin is not None:
            turn = self.store.get(twin).turn
            return self._plan(turn.parent_id, messages, None, idempotent_reply=turn)
        if self.config.strict_append_only:
            parent_id, found = self._strict_attach_point(messages, tools)
        else:
            parent_id, found = self._attach_point(messages, tools)
        if parent_id is not None:
            parent = self.store.get(parent_id).turn
            if parent.finish_reason == "length":
                raise TruncatedTurnError(parent_id, parent.response_id)
        self._check_capacity()
        return self._plan(parent_id, messages, found)

    def _plan(
        self,
        parent_id: int | None,
        messages: Sequence[Message],
        found: ResendMatch | None,
        idempotent_reply: TurnCommitted | None = None,
    ) -> TurnPlan:
        stored = [] if parent_id is None else self.store.path_messages(parent_id)
        appended = (found or ResendMatch()).restore_call_ids(messages[len(stored) :])
        branched = bool(self.store.get(parent_id).children) if parent_id is not None else bool(self.store.roots)
        return TurnPlan(
            parent_id=parent_id,
            stored_messages=stored,
            stored_ids=PathIds() if parent_id is None else self.store.stored_ids(parent_id),
            new_messages=[*stored, *appended],
            appended=appended,
            version=self.store.next_node_id,
            idempotent_reply=idempotent_reply,
            resend=found if found is not None and len(self.store) else None,
            branched=branched and idempotent_reply is None,
        )

    def _attach_point(
        self, messages: Sequence[Message], tools: Sequence[Message] | None
    ) -> tuple[int | None, ResendMatch]:
        """The deepest fully matched node (None: a new root) and what matching its path needed."""
        best: tuple[int, int] | None = None  # (messages covered, node id): the max is deepest, then latest
        best_found = ResendMatch()
        reply_keys: dict[int, Hashable] = {}
        pending: list[tuple[int | None, int, ResendMatch]] = [(None, 0, best_found)]
        while pending:
            parent_id, offset, found = pending.pop()
            for length, by_reply in self._children_by_reply.get(parent_id, {}).items():
                reply = offset + length  # where the children's assistant sits in the request
                if reply >= len(messages):
                    continue
                if reply not in reply_keys:
                    reply_keys[reply] = self.matcher.key(messages[reply])
                for node_id in by_reply.get(reply_keys[reply], ()):
                    turn = self.store.get(node_id).turn
                    omitted = parent_id is None and self._tools_omitted(turn.tools, tools)
                    if parent_id is None and not omitted and not _same_tools(turn.tools, tools):
                        continue
                    trial = self._match_turn(turn, messages[offset:reply], messages[reply], found)
                    if trial is not None and omitted:
                        trial = trial.copy()
                        trial.rules.add("tools_omitted")
                    if trial is not None:
                        if best is None or (reply + 1, node_id) > best:
                            best, best_found = (reply + 1, node_id), trial
                        pending.append((node_id, reply + 1, trial))
        return (None, ResendMatch()) if best is None else (best[1], best_found)

    def _match_turn(
        self, turn: TurnCommitted, request: Sequence[Message], reply: Message, found: ResendMatch
    ) -> ResendMatch | None:
        """What matching `turn` (its request messages, then its assistant, whose key already matched `reply`) adds to
        `found`: `found` itself when nothing (the common case, no copy), a copy with the rules used, or None."""
        pairing = "call_ids_regenerated" in found.rules  # then a resend's tool messages differ from the stored ones
        same_request = not pairing and list(request) == list(turn.request_messages)  # decided in C
        if same_request and (self.matcher.key_decides or reply == turn.assistant):
            return found
        trial = found.copy()
        matched = self.matcher.match_prefix((*turn.request_messages, turn.assistant), [*request, reply], trial)
        return trial if matched is None else None

    def _tools_omitted(self, stored: Sequence[Message] | None, sent: Sequence[Message] | None) -> bool:
        """Under `harness`, a request without tools continues a root that had them (the `tools_omitted` rule)."""
        return not sent and bool(stored) and self.matcher.name == "harness"

    def _strict_attach_point(
        self, messages: Sequence[Message], tools: Sequence[Message] | None
    ) -> tuple[int | None, ResendMatch]:
        """Strict append-only: the request must extend the latest commit's path; anything else is a 400."""
        latest = self._latest_id
        if latest is None:
            return None, ResendMatch()
        hint = f"this session is strict append-only: a request must extend the latest turn's path (node {latest})"
        root_tools = self.store.path(latest)[0].turn.tools
        if not _same_tools(root_tools, tools):
            raise StrictAppendOnlyError(0, "tools", root_tools, tools, hint=hint)
        stored = self.store.path_messages(latest)
        try:
            if len(messages) < len(stored):  # show a differing message before the missing ones
                match_resend(stored[: len(messages)], messages, self.matcher)
            found = match_resend(stored, messages, self.matcher)
        except AppendOnlyError as exc:
            raise StrictAppendOnlyError(exc.index, exc.field, exc.expected, exc.actual, hint=hint) from exc
        return latest, found

    def _check_capacity(self) -> None:
        max_nodes = self.config.max_nodes
        if max_nodes is not None and len(self.store) >= max_nodes:
            raise TreeCapacityError(max_nodes)

    def check(self, plan: TurnPlan) -> None:
        """Siblings never conflict; only capacity (a concurrent commit may have filled the session) and, in strict
        mode, a commit since planning (this turn would branch) refuse the commit."""
        if self.config.strict_append_only and plan.version != self.store.next_node_id:
            raise ConcurrentBranchError(
                f"node {self._latest_id} was committed while this request was generating from node "
                f"{plan.parent_id}; this session is strict append-only, so the turn would branch. Resend the "
                "request extending the latest turn"
            )
        self._check_capacity()

    def apply(self, event: TurnCommitted) -> None:
        self.store.add(event)
        by_length = self._children_by_reply.setdefault(event.parent_id, {})
        by_reply = by_length.setdefault(len(event.request_messages), {})
        by_reply.setdefault(self.matcher.key(event.assistant), []).append(event.node_id)
        self._latest_by_fingerprint[event.request_fingerprint] = event.node_id
        self._latest_id = event.node_id

    def path_ids(self, node_id: int) -> array[int]:
        return self.store.path_ids(node_id)

    def sample_sequences(self) -> list[PathSequence]:
        """One path sequence per kept leaf, in the picker's order; each node trained in one sequence only."""
        tree = TreeView.of(self.store)
        sequences = [self.store.path_sequence(leaf) for leaf in pick_leaves(self._picker, tree, self._picker_name)]
        train_each_node_once(sequences)
        return sequences

    def postprocess_samples(self, samples: Sequence[T]) -> list[T]:
        """The samples assembled from `sample_sequences()` after the configured post-processor (contract checked)."""
        if self._postprocessor is None or self.config.sample_postprocessor is None:
            return list(samples)
        return postprocess(self._postprocessor, samples, TreeView.of(self.store), self.config.sample_postprocessor)

    def describe(self) -> Mapping[str, Any]:
        """The forest (each node's parent, depth, token counts and sampled span), the leaves and the active path
        (the latest commit's, which is what the agent most recently saw)."""
        lengths: dict[int, int] = {}
        depths: dict[int, int] = {}
        nodes: list[dict[str, Any]] = []
        for node in self.store:
            turn = node.turn
            parent = turn.parent_id
            start = (0 if parent is None else min(lengths[parent], turn.kept_parent_ids)) + len(turn.prompt_ids)
            lengths[turn.node_id] = start + len(turn.output_ids)
            depths[turn.node_id] = 0 if parent is None else depths[parent] + 1
            nodes.append(
                {
                    "node_id": turn.node_id,
                    "parent_id": parent,
                    "children": list(node.children),
                    "depth": depths[turn.node_id],
                    "request_messages": len(turn.request_messages),
                    "prompt_tokens": start,
                    "sampled_tokens": len(turn.output_ids),
                    "sampled_span": [start, lengths[turn.node_id]],
                    "finish_reason": turn.finish_reason,
                    "response_id": turn.response_id,
                    "committed_at": turn.at,
                }
            )
        latest = self._latest_id
        return {
            "trajectory": "tree",
            "node_count": len(nodes),
            "max_nodes": self.config.max_nodes,
            "strict_append_only": self.config.strict_append_only,
            "nodes": nodes,
            "roots": list(self.store.roots),
            "leaves": self.store.leaves(),
            "active_leaf": latest,
            "active_path": [] if latest is None else [node.node_id for node in self.store.path(latest)],
            "messages": [] if latest is None else [dict(message) for message in self.store.path_messages(latest)],
        }


def _same_tools(stored: Sequence[Message] | None, sent: Sequence[Message] | None) -> bool:
    return list(stored or ()) == list(sent or ())
