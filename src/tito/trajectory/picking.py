"""Which leaves of a tree session become samples, and how each node is trained exactly once.

The default picker drops superseded retries; a deployment replaces it (and adds a post-processor) by import path
(`module:function`). Hooks are user code running inside the server, so every call is checked against its
contract: a hook that raises, or returns something it was not given or the same thing twice, is a
`SampleHookError` (422) naming the hook, never a silently wrong sample.

Imports nothing from tito but errors, trajectory.events and trajectory.nodes.
"""

from __future__ import annotations

import importlib
import inspect
import json
from array import array
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from tito.errors import ConfigurationError, TitoError
from tito.trajectory.events import TurnCommitted
from tito.trajectory.nodes import NodeStore, PathSequence

T = TypeVar("T")


class SampleHookError(TitoError):
    """A sample picker or post-processor raised or broke its contract; names the hook and what it did."""

    http_status = 422

    def __init__(self, hook: str, problem: str) -> None:
        self.hook = hook
        self.problem = problem
        super().__init__(f"sample hook {hook}: {problem}")


@dataclass(frozen=True)
class TreeNodeView:
    """One committed generation as a picker sees it."""

    turn: TurnCommitted
    children: tuple[int, ...]
    """Child node ids in commit order."""
    depth: int
    """0 for a root."""

    @property
    def node_id(self) -> int:
        return self.turn.node_id

    @property
    def parent_id(self) -> int | None:
        return self.turn.parent_id


@dataclass(frozen=True)
class TreeView:
    """A read-only snapshot of a session's tree: what a picker chooses from."""

    nodes: Mapping[int, TreeNodeView]
    """Every node by id, in commit order (a parent always precedes its children)."""
    leaves: tuple[int, ...]
    """The candidate leaves (nodes without children), in commit order."""

    @classmethod
    def of(cls, store: NodeStore) -> TreeView:
        depths: dict[int, int] = {}
        nodes: dict[int, TreeNodeView] = {}
        for node in store:
            parent = node.parent_id
            depths[node.node_id] = 0 if parent is None else depths[parent] + 1
            nodes[node.node_id] = TreeNodeView(node.turn, tuple(node.children), depths[node.node_id])
        return cls(nodes, tuple(store.leaves()))

    def path(self, node_id: int) -> list[int]:
        """Node ids from the root down to `node_id`."""
        ids: list[int] = []
        current: int | None = node_id
        while current is not None:
            ids.append(current)
            current = self.nodes[current].parent_id
        ids.reverse()
        return ids


SamplePicker = Callable[[TreeView], Sequence[int]]
"""(tree) -> the ids of the leaves to keep, each a member of `tree.leaves`, no duplicates, any order."""
SamplePostprocessor = Callable[[list[Any], TreeView], Sequence[Any]]
"""(samples, tree) -> samples, each one of the objects it was given (by identity), no duplicates, any order."""


def drop_superseded_retries(tree: TreeView) -> list[int]:
    """The default picker: keep every leaf but a superseded one, a generation that a later generation answers the
    same request for (same parent, same request messages and tools: the agent retried it).

    Any other leaf is kept, whatever came after it: a generation is never dropped for being early or a branch.
    """
    latest: dict[tuple[int | None, str], int] = {}
    for node in tree.nodes.values():  # commit order: the last generation of each request wins
        latest[_request_of(node.turn)] = node.node_id
    return [leaf for leaf in tree.leaves if latest[_request_of(tree.nodes[leaf].turn)] == leaf]


def _request_of(turn: TurnCommitted) -> tuple[int | None, str]:
    """What a generation answered: its parent and its request's messages and tools (as JSON text, so any value
    compares)."""
    return turn.parent_id, json.dumps([turn.request_messages, turn.tools], sort_keys=True, default=repr)


def train_each_node_once(sequences: Sequence[PathSequence]) -> None:
    """Zero the loss mask and logprobs of a node everywhere but in the earliest-committed kept leaf holding it.

    Mutates the sequences' freshly assembled arrays in place. A sequence's leaf is its last span's node.
    """
    owner: dict[int, int] = {}
    for sequence in sorted(sequences, key=_leaf_id):
        for span in sequence.spans:
            owner.setdefault(span.node_id, _leaf_id(sequence))
    for sequence in sequences:
        leaf = _leaf_id(sequence)
        for span in sequence.spans:
            if owner[span.node_id] != leaf and span.end > span.start:
                width = span.end - span.start
                sequence.loss_mask[span.start : span.end] = array("b", bytes(width))
                sequence.logprobs[span.start : span.end] = array("f", bytes(4 * width))


def _leaf_id(sequence: PathSequence) -> int:
    return sequence.spans[-1].node_id


def load_hook(import_path: str, option: str) -> Callable[..., Any]:
    """The function at `module:function` (dots after the colon reach attributes); `option` names the setting.

    Raises ConfigurationError when it cannot be imported, is not callable, or is async (hooks run synchronously
    inside the request), so a bad setting fails at startup rather than at the first `/samples`.
    """
    module_name, colon, attribute = import_path.partition(":")
    if not colon or not module_name or not attribute:
        raise ConfigurationError(f"{option} {import_path!r}: expected 'module:function', e.g. 'my_rl.hooks:pick'")
    try:
        value: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(f"{option} {import_path!r}: cannot import module {module_name!r}: {exc}") from exc
    for part in attribute.split("."):
        if not hasattr(value, part):
            raise ConfigurationError(f"{option} {import_path!r}: {module_name!r} has no attribute {attribute!r}")
        value = getattr(value, part)
    if not callable(value):
        raise ConfigurationError(f"{option} {import_path!r} is a {type(value).__name__}, not a function")
    if inspect.iscoroutinefunction(value):
        raise ConfigurationError(f"{option} {import_path!r} is async; sample hooks must be plain functions")
    return value  # type: ignore[no-any-return]


def pick_leaves(picker: SamplePicker, tree: TreeView, hook: str) -> list[int]:
    """Run `picker` and check its contract: a subset of `tree.leaves`, without duplicates."""
    try:
        picked = picker(tree)
    except Exception as exc:
        raise SampleHookError(hook, f"raised {type(exc).__name__}: {exc}") from exc
    return _checked_selection(hook, _as_list(hook, picked), tree.leaves, "leaf id", repr)


def postprocess(postprocessor: SamplePostprocessor, samples: Sequence[T], tree: TreeView, hook: str) -> list[T]:
    """Run `postprocessor` and check its contract: only the sample objects it was given, each at most once."""
    try:
        returned = postprocessor(list(samples), tree)
    except Exception as exc:
        raise SampleHookError(hook, f"raised {type(exc).__name__}: {exc}") from exc
    by_identity = {id(sample): sample for sample in samples}
    returned_ids = [id(item) for item in _as_list(hook, returned)]
    chosen_ids = _checked_selection(hook, returned_ids, by_identity, "sample", lambda _: "an object it was not given")
    return [by_identity[key] for key in chosen_ids]


def _as_list(hook: str, returned: object) -> list[Any]:
    if isinstance(returned, (str, bytes)) or not isinstance(returned, Iterable):
        raise SampleHookError(hook, f"must return a list, returned a {type(returned).__name__}")
    return list(returned)


def _checked_selection(
    hook: str, chosen: list[Any], given: Iterable[Hashable], noun: str, shown: Callable[[Any], str]
) -> list[Any]:
    """`chosen` unchanged if it holds only members of `given`, each once; else the error naming the hook."""
    allowed = set(given)
    seen: set[object] = set()
    for position, item in enumerate(chosen):
        if not isinstance(item, Hashable) or item not in allowed:
            raise SampleHookError(
                hook, f"returned {shown(item)} at position {position}; it may only return the {noun}s it was given"
            )
        if item in seen:
            raise SampleHookError(hook, f"returned the same {noun} twice (position {position})")
        seen.add(item)
    return chosen
