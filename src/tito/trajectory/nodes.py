"""The node store both trajectory kinds keep: one node per committed generation, ids stored once.

A node holds only what its turn added (its `TurnCommitted`): the prompt ids beyond the parent's kept ids and
the sampled ids. A path's ids are assembled by walking from the root, so branches share their prefix and
nothing is copied per turn (no quadratic memory). Linear sessions are the special case that keeps one path.

Imports nothing from tito but errors, path_ids and trajectory.events.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from tito.errors import TitoError
from tito.path_ids import IdParts, PathIds
from tito.trajectory.events import Message, TurnCommitted


class TrajectoryIntegrityError(TitoError):
    """An event does not fit the stored nodes (unknown parent, reused id, impossible kept-id count)."""

    http_status = 500


@dataclass(slots=True)
class Node:
    turn: TurnCommitted
    children: list[int] = field(default_factory=list)
    path_length: int = 0
    """The number of ids on the path through this node (its full prompt and its sampled ids), set when it is added:
    a turn's check of its parent's length does not walk the path."""

    @property
    def node_id(self) -> int:
        return self.turn.node_id

    @property
    def parent_id(self) -> int | None:
        return self.turn.parent_id


@dataclass(frozen=True)
class SampledSpan:
    """Where one node's ids lie in an assembled path sequence: its own prompt ids `tokens[prompt_start:start]`
    (beyond the kept parent ids), its sampled ids `tokens[start:end]`."""

    node_id: int
    start: int
    end: int
    prompt_start: int


@dataclass(frozen=True)
class PathSequence:
    """A path's ids with the loss mask (1 only on engine-sampled ids) and logprobs (0.0 where the mask is 0)."""

    tokens: array[int]
    loss_mask: array[int]
    """`array('b')`, one 0/1 per token."""
    logprobs: array[float]
    spans: tuple[SampledSpan, ...]
    """One per node on the path, root first; a span shortened by a later junction keeps its shorter extent."""


def path_parts(path: Sequence[Node]) -> IdParts:
    """The parts of a path's ids (its nodes, root first): each node's own ids after those it keeps of its parent's,
    found walking back from the tip (a later junction may drop trailing ids of earlier nodes)."""
    parts: IdParts = []
    limit: int | None = None
    for node in reversed(path):
        turn = node.turn
        start = turn.kept_parent_ids
        count = node.path_length - start if limit is None else min(limit, node.path_length) - start
        prompt, output = turn.prompt_ids, turn.output_ids
        if count > len(prompt):
            parts.append(output if count >= len(prompt) + len(output) else output[: count - len(prompt)])
        if count > 0:
            parts.append(prompt if count >= len(prompt) else prompt[:count])
        limit = start if limit is None else min(limit, start)
    parts.reverse()
    return parts


def extend_parts(parts: IdParts, length: int, node: Node) -> None:
    """Extend the parts of a path of `length` ids by `node`, a child of its tip: its kept ids, then its own."""
    drop = length - node.turn.kept_parent_ids
    while drop > 0:
        last = parts.pop()
        if len(last) > drop:
            parts.append(last[: len(last) - drop])
        drop -= len(last)
    parts.append(node.turn.prompt_ids)
    parts.append(node.turn.output_ids)


class NodeStore:
    """Committed nodes by id, their children, and path assembly."""

    def __init__(self) -> None:
        self._nodes: dict[int, Node] = {}
        self._roots: list[int] = []
        self._next_node_id = 0
        self._by_response_id: dict[str, int] = {}
        """Response id -> node id: a dialect's round-trip value finds its turn in O(1), not by a scan per value."""

    def __len__(self) -> int:
        return len(self._nodes)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._nodes

    def __iter__(self) -> Iterator[Node]:
        """Nodes in commit order."""
        return iter(self._nodes.values())

    @property
    def next_node_id(self) -> int:
        """The id the next committed node gets: ids follow commit order and are never reused."""
        return self._next_node_id

    @property
    def roots(self) -> tuple[int, ...]:
        return tuple(self._roots)

    def get(self, node_id: int) -> Node:
        try:
            return self._nodes[node_id]
        except KeyError:
            raise TrajectoryIntegrityError(f"node {node_id} is not in this session") from None

    def by_response_id(self, response_id: str) -> Node | None:
        """The stored node whose turn replied with this response id (None: never committed, or dropped)."""
        node_id = self._by_response_id.get(response_id)
        return None if node_id is None else self._nodes[node_id]

    def add(self, turn: TurnCommitted) -> Node:
        """Store a committed turn as a node below its parent (or as a new root)."""
        if turn.node_id in self._nodes or turn.node_id < self._next_node_id:
            raise TrajectoryIntegrityError(f"node id {turn.node_id} was already used in this session")
        if turn.parent_id is not None:
            parent = self.get(turn.parent_id)
            parent_length = parent.path_length
            if not 0 <= turn.kept_parent_ids <= parent_length:
                raise TrajectoryIntegrityError(
                    f"node {turn.node_id} keeps {turn.kept_parent_ids} ids of a {parent_length}-id parent path"
                )
            parent.children.append(turn.node_id)
        else:
            if turn.kept_parent_ids != 0:
                raise TrajectoryIntegrityError(f"root node {turn.node_id} cannot keep parent ids")
            self._roots.append(turn.node_id)
        node = Node(turn, path_length=turn.kept_parent_ids + len(turn.prompt_ids) + len(turn.output_ids))
        self._nodes[turn.node_id] = node
        self._by_response_id.setdefault(turn.response_id, turn.node_id)  # the first commit of an id keeps it
        self._next_node_id = turn.node_id + 1
        return node

    def remove_subtree(self, node_id: int) -> list[int]:
        """Drop a node and its descendants (a linear retry supersedes them); returns the dropped ids."""
        node = self.get(node_id)
        if node.parent_id is None:
            self._roots.remove(node_id)
        else:
            self.get(node.parent_id).children.remove(node_id)
        dropped: list[int] = []
        pending = [node_id]
        while pending:
            current = self._nodes.pop(pending.pop())
            if self._by_response_id.get(current.turn.response_id) == current.node_id:
                del self._by_response_id[current.turn.response_id]
            dropped.append(current.node_id)
            pending.extend(current.children)
        return dropped

    def path(self, node_id: int) -> list[Node]:
        """The nodes from the root down to `node_id`."""
        nodes: list[Node] = []
        current: int | None = node_id
        while current is not None:
            node = self.get(current)
            nodes.append(node)
            current = node.parent_id
        nodes.reverse()
        return nodes

    def path_messages(self, node_id: int) -> list[Message]:
        """The conversation the node ends: each turn's request messages, then its assistant reply."""
        messages: list[Message] = []
        for node in self.path(node_id):
            messages.extend(node.turn.request_messages)
            messages.append(node.turn.assistant)
        return messages

    def path_length(self, node_id: int) -> int:
        """The number of ids on the path, without assembling them."""
        return self.get(node_id).path_length

    def path_ids(self, node_id: int) -> array[int]:
        """The node's ids: its full prompt, then its sampled ids."""
        return self.stored_ids(node_id).joined()

    def stored_ids(self, node_id: int) -> PathIds:
        """The node's ids as the parts that hold them, not joined: what a turn below it builds its prompt on."""
        return PathIds(path_parts(self.path(node_id)), self.get(node_id).path_length)

    def path_sequence(self, node_id: int) -> PathSequence:
        """The path's ids, loss mask, logprobs and per-node sampled spans: what a sample is assembled from."""
        tokens: array[int] = array("i")
        mask: array[int] = array("b")
        logprobs: array[float] = array("f")
        spans: list[SampledSpan] = []
        for node in self.path(node_id):
            turn = node.turn
            keep = turn.kept_parent_ids if node.parent_id is not None else 0
            del tokens[keep:], mask[keep:], logprobs[keep:]
            spans = [
                SampledSpan(s.node_id, min(s.start, keep), min(s.end, keep), min(s.prompt_start, keep)) for s in spans
            ]
            tokens.extend(turn.prompt_ids)
            mask.extend(bytes(len(turn.prompt_ids)))
            logprobs.extend(array("f", bytes(4 * len(turn.prompt_ids))))
            start = len(tokens)
            tokens.extend(turn.output_ids)
            mask.extend(b"\x01" * len(turn.output_ids))
            logprobs.extend(turn.output_logprobs)
            spans.append(SampledSpan(turn.node_id, start, len(tokens), keep))
        return PathSequence(tokens, mask, logprobs, tuple(spans))

    def leaves(self) -> list[int]:
        """Nodes without children, in commit order."""
        return [node.node_id for node in self._nodes.values() if not node.children]
