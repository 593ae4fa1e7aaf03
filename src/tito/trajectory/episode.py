"""An agent episode: one session holds several conversations, each a linear or tree trajectory of its own.

Real agents multiplex conversations over one base URL: the main loop, sub-agents, side requests (titles,
summaries, classifiers) and compactions. Each request is routed to exactly one conversation, and no conversation
ever replaces, branches or refuses another's turns; a linear one-step retry happens within a conversation only,
and conversations commit concurrently (each checks only its own plan).

Routing, in order:
1. An SDK retry of a committed request goes to the conversation that holds it.
2. Stated lineage (`Lineage`, read from the request's headers by the server): a request joins the conversation of
   its key whose opening it resends; when it resends none (its history was replaced), or when the lineage says it
   always opens one (a compaction request), it opens a new conversation with that key, linked to the key's latest
   (to the conversation a compaction summarised, when the request carries that compaction's summary).
3. Otherwise by prefix, among the conversations opened without a key: a request joins the conversation whose
   opening (its first turn's request messages) it resends, the one whose stored messages it repeats furthest when
   several do. A request that resends a linear conversation's last request but not its reply, and asks something
   else instead (what Claude Code's compaction sends), forks a new conversation instead of retrying or branching it.
   Under `harness`, a request that resends a linear conversation's generated reply rewritten as another assistant
   message (smolagents' tool calls resent as text) opens a conversation that continues it, forked from that reply's
   node, instead of a 400: a documented branch, and every sampled id of both stays in a sample.
   A request that resends no opening opens a new conversation, recorded as inferred (`source="prefix"`); when it
   carries a compaction's summary (the whole reply, or its `<summary>` block as Claude Code resends it), the new
   conversation `continues` the one that compaction summarised, and takes its kind (the main loop goes on).
   A request that resends a conversation's opening but not its stored turns, and carries the summary of a compaction
   of that conversation in their place (Codex after compacting), opens that conversation's continuation the same way.

A conversation's kind, parent and spawning tool call are derived from the facts its first turn recorded
(`ConversationOpening`) whenever they are read, by `ConversationInfo` rules documented on `conversation_infos`,
so a live and a replayed episode label alike.

Imports nothing from tito but errors, matching and trajectory (base, events, linear, nodes, shared_values, tree).
"""

from __future__ import annotations

import heapq
import json
import re
from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from tito.errors import TitoError
from tito.matching import MatchingPolicy, ResendMatch, matching_policy
from tito.trajectory.base import TurnPlan
from tito.trajectory.events import (
    FIRST_CONVERSATION,
    ConversationOpening,
    Message,
    SessionConfig,
    TrajectoryKind,
    TurnCommitted,
    with_changes,
)
from tito.trajectory.linear import LinearTrajectory
from tito.trajectory.nodes import Node, PathSequence, TrajectoryIntegrityError
from tito.trajectory.shared_values import SHARED
from tito.trajectory.tree import TreeCapacityError, TreeTrajectory

T = TypeVar("T")
ConversationTrajectory = LinearTrajectory | TreeTrajectory

_SPAWN_TEXT_MIN = 8
"""The shortest tool-call argument string that may name a sub-agent's first message (shorter ones match by chance)."""
_SUMMARY_BLOCK = re.compile(r"<summary>(.*?)</summary>", re.DOTALL)
"""A compaction reply's summary block (Claude Code's compaction prompt asks for `<analysis>` then `<summary>`)."""


@dataclass(frozen=True)
class Lineage:
    """What a request states about its conversation (the server reads it from headers; `server.sessions.lineage`)."""

    source: str
    """`x-tito-conversation`, `codex` or `claude-code`."""
    key: str | None = None
    """The conversation's stated key, namespaced by source (`codex:thread:...`); None: the agent states a kind or a
    parent but not which conversation (the request is routed by prefix)."""
    kind: str | None = None
    parent_key: str | None = None
    spawned_by: str | None = None
    fresh: bool = False
    """Every such request opens a conversation of its own (a compaction request)."""


@dataclass
class Conversation:
    """One conversation of the episode: its opening facts and its own trajectory."""

    conversation_id: str
    opening: ConversationOpening
    trajectory: ConversationTrajectory

    def opening_messages(self) -> Sequence[Message]:
        """The request messages of its first stored turn (linear: the path's root; tree: the first root)."""
        store = self.trajectory.store
        return store.get(store.roots[0]).turn.request_messages if store.roots else ()

    def latest_node(self) -> int | None:
        """Its most recent commit still stored (linear: the head)."""
        trajectory = self.trajectory
        if isinstance(trajectory, LinearTrajectory):
            return trajectory.head
        return max((node.node_id for node in trajectory.store), default=None)

    def latest_messages(self) -> list[Message]:
        """The stored messages of its most recent path."""
        trajectory = self.trajectory
        if isinstance(trajectory, LinearTrajectory):
            return trajectory.messages()
        latest = self.latest_node()
        return [] if latest is None else trajectory.store.path_messages(latest)


@dataclass(frozen=True)
class ConversationInfo:
    """A conversation as samples, exports and the inspector label it."""

    conversation_id: str
    kind: str
    """`main`, `subagent`, `side` or `compaction` (`events.CONVERSATION_KINDS`)."""
    parent: str | None
    """The conversation it belongs under (a sub-agent's spawner, a compaction's subject); None for the main loop."""
    spawned_by: str | None
    """The parent's tool call id that spawned it (stated, or found: the call whose arguments hold its first
    user message); None where unknown."""
    inferred: bool
    """True when tito inferred the conversation boundary from the messages (no lineage stated a key)."""
    source: str
    key: str | None
    continues: str | None
    compaction: str | None
    forked_from: int | None

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.conversation_id,
            "kind": self.kind,
            "parent": self.parent,
            "spawned_by": self.spawned_by,
            "inferred": self.inferred,
            "source": self.source,
            "key": self.key,
            "continues": self.continues,
            "compaction": self.compaction,
            "forked_from": self.forked_from,
        }


def new_conversation_trajectory(config: SessionConfig) -> ConversationTrajectory:
    """An empty trajectory of the kind `config` asks for."""
    if config.trajectory is TrajectoryKind.LINEAR:
        return LinearTrajectory(config)
    return TreeTrajectory(config)


class EpisodeStore:
    """Every conversation's nodes as one read-only store (node ids are unique across the episode)."""

    def __init__(self, episode: Episode) -> None:
        self._episode = episode

    def _store_of(self, node_id: int) -> Any:
        conversation = self._episode.conversation_of(node_id)
        if conversation is None:
            raise TrajectoryIntegrityError(f"node {node_id} is not in this session")
        return conversation.trajectory.store

    def __len__(self) -> int:
        return sum(len(c.trajectory.store) for c in self._episode.conversations.values())

    def __contains__(self, node_id: object) -> bool:
        return isinstance(node_id, int) and self._episode.conversation_of(node_id) is not None

    def __iter__(self) -> Iterator[Node]:
        """Nodes in commit order, across conversations."""
        stores = [iter(c.trajectory.store) for c in self._episode.conversations.values()]
        return iter(stores[0]) if len(stores) == 1 else heapq.merge(*stores, key=lambda node: node.node_id)

    @property
    def next_node_id(self) -> int:
        return self._episode.next_node_id

    @property
    def roots(self) -> tuple[int, ...]:
        return tuple(root for c in self._episode.conversations.values() for root in c.trajectory.store.roots)

    def get(self, node_id: int) -> Node:
        node: Node = self._store_of(node_id).get(node_id)
        return node

    def by_response_id(self, response_id: str) -> Node | None:
        """The node that committed the reply `response_id`, in whichever conversation holds it (each conversation's
        store keeps its own index)."""
        for conversation in self._episode.conversations.values():
            node: Node | None = conversation.trajectory.store.by_response_id(response_id)
            if node is not None:
                return node
        return None

    def path(self, node_id: int) -> list[Node]:
        path: list[Node] = self._store_of(node_id).path(node_id)
        return path

    def path_messages(self, node_id: int) -> list[Message]:
        messages: list[Message] = self._store_of(node_id).path_messages(node_id)
        return messages

    def path_length(self, node_id: int) -> int:
        return int(self._store_of(node_id).path_length(node_id))

    def path_ids(self, node_id: int) -> array[int]:
        ids: array[int] = self._store_of(node_id).path_ids(node_id)
        return ids

    def path_sequence(self, node_id: int) -> PathSequence:
        sequence: PathSequence = self._store_of(node_id).path_sequence(node_id)
        return sequence

    def leaves(self) -> list[int]:
        return sorted(leaf for c in self._episode.conversations.values() for leaf in c.trajectory.store.leaves())


class Episode:
    """A session's conversations, in opening order; mutated only by `apply` (the `Trajectory` protocol)."""

    def __init__(self, config: SessionConfig) -> None:
        self.config = config
        self.matcher: MatchingPolicy = matching_policy(config.matcher)
        self.conversations: dict[str, Conversation] = {}
        self.store = EpisodeStore(self)
        self._by_key: dict[str, list[str]] = {}
        """Stated key -> its conversations' ids, oldest first."""
        self._by_fingerprint: dict[str, str] = {}
        """Request fingerprint -> the conversation of its latest commit: where an SDK retry goes."""
        self._node_conversation: dict[int, str] = {}
        """Every node ever committed -> its conversation (a superseded node's stays)."""
        self.next_node_id = 0
        """Node ids are unique across the episode, in commit order."""
        self._blank = new_conversation_trajectory(config)
        """An empty conversation: what an opening request is planned against (built now, so a picker hook that
        cannot be imported fails when the session is created)."""

    def conversation_of(self, node_id: int) -> Conversation | None:
        """The conversation holding the node now (None: never committed, or superseded by a retry)."""
        conversation = self.conversations.get(self._node_conversation.get(node_id, ""))
        return conversation if conversation is not None and node_id in conversation.trajectory.store else None

    def plan(
        self,
        messages: Sequence[Message],
        tools: Sequence[Message] | None,
        fingerprint: str,
        is_retry: bool,
        lineage: Lineage | None = None,
        structured_output: bool = False,
    ) -> TurnPlan:
        """Route the request to its conversation (module docstring) and plan it there; mutates nothing. A tree
        session's `max_nodes` counts the whole episode's nodes."""
        if is_retry and fingerprint in self._by_fingerprint:
            owner = self.conversations[self._by_fingerprint[fingerprint]]
            plan = owner.trajectory.plan(messages, tools, fingerprint, True)
            if plan.idempotent_reply is not None:
                return with_changes(plan, conversation=owner.conversation_id)
        self._check_capacity()
        has_tools = bool(tools)
        if lineage is not None and lineage.key is not None:
            keyed = [self.conversations[c] for c in self._by_key.get(lineage.key, ())]
            chosen = None if lineage.fresh else self._resent(keyed, messages)
            if chosen is not None:
                return self._extend(chosen, messages, tools, fingerprint, lineage)
            compaction = None if lineage.fresh else self._continued_compaction(messages)
            replaced = keyed[-1].conversation_id if keyed and not lineage.fresh else None
            opening = ConversationOpening(
                source=lineage.source,
                key=lineage.key,
                kind=lineage.kind,
                parent_key=lineage.parent_key,
                spawned_by=lineage.spawned_by,
                continues=replaced if compaction is None else self._subject_of(compaction),
                compaction=None if compaction is None else compaction.conversation_id,
                has_tools=has_tools,
                structured_output=structured_output,
            )
            return self._open(messages, tools, fingerprint, opening)
        unkeyed = [c for c in self.conversations.values() if c.opening.key is None]
        chosen = self._resent(unkeyed, messages)
        if chosen is not None:
            return self._extend(chosen, messages, tools, fingerprint)
        compaction = self._continued_compaction(messages)
        opening = ConversationOpening(
            source="prefix" if lineage is None else lineage.source,
            kind=None if lineage is None else lineage.kind,
            parent_key=None if lineage is None else lineage.parent_key,
            spawned_by=None if lineage is None else lineage.spawned_by,
            continues=None if compaction is None else self._subject_of(compaction),
            compaction=None if compaction is None else compaction.conversation_id,
            has_tools=has_tools,
            structured_output=structured_output,
        )
        return self._open(messages, tools, fingerprint, opening)

    def _resent(self, candidates: Sequence[Conversation], messages: Sequence[Message]) -> Conversation | None:
        """The conversation whose opening the request resends; of several, the one whose latest stored messages it
        repeats furthest (ties: the latest opened)."""
        matching = [c for c in candidates if self._resends(c.opening_messages(), messages)]
        if len(matching) <= 1:
            return matching[0] if matching else None
        return max(reversed(matching), key=lambda c: _common_prefix(c.latest_messages(), messages))

    def _resends(self, opening: Sequence[Message], messages: Sequence[Message]) -> bool:
        if not opening or len(messages) < len(opening):
            return False
        if list(messages[: len(opening)]) == list(opening):
            return True
        return self.matcher.match_prefix(opening, messages[: len(opening)], ResendMatch()) is None

    def _extend(
        self,
        conversation: Conversation,
        messages: Sequence[Message],
        tools: Sequence[Message] | None,
        fingerprint: str,
        lineage: Lineage | None = None,
    ) -> TurnPlan:
        latest = conversation.latest_node()
        if latest is not None:
            stored = conversation.latest_messages()
            last = len(stored) - 1
            replaced = len(messages) <= last or messages[last] != stored[last]  # cheap: most requests resend it
            compaction = self._continued_compaction(messages) if replaced else None
            if compaction is not None and self._subject_of(compaction) == conversation.conversation_id:
                # Codex after its compaction: the opening again, then the summary in place of the turns it replaced
                opening = ConversationOpening(
                    source="prefix" if lineage is None else lineage.source,
                    key=None if lineage is None else lineage.key,
                    continues=conversation.conversation_id,
                    compaction=compaction.conversation_id,
                    has_tools=bool(tools),
                )
                return self._open(messages, tools, fingerprint, opening)
            if self._forks(stored, messages):
                opening = ConversationOpening(source="prefix", forked_from=latest, has_tools=bool(tools))
                return self._open(messages, tools, fingerprint, opening)
        plan: TurnPlan | None = None
        refused: TitoError | None = None
        try:
            plan = conversation.trajectory.plan(messages, tools, fingerprint, False)
        except TitoError as exc:  # unless the request rewrote a reply (below): its own conversation, no error
            refused = exc
        if plan is None or plan.replaces is not None:
            # it left the stored messages (a plan that extends them replaces nothing: they are compared once, there)
            rewritten = self._rewritten_reply(conversation, messages)
            if rewritten is not None:
                node_id, found = rewritten
                opening = ConversationOpening(
                    source="prefix",
                    continues=conversation.conversation_id,
                    forked_from=node_id,
                    has_tools=bool(tools),
                )
                plan = self._open(messages, tools, fingerprint, opening)
                return with_changes(plan, resend=found, branched=True)
        if plan is None:
            assert refused is not None
            raise refused
        return with_changes(plan, conversation=conversation.conversation_id)

    def _forks(self, stored: Sequence[Message], messages: Sequence[Message]) -> bool:
        """Whether the request resends the latest turn's request but not its reply, and asks something else in its
        place (what Claude Code's compaction sends): not a retry of that turn, whose reply a linear conversation
        would drop, nor a branch of it, but a conversation of its own forked from this one."""
        last = len(stored) - 1
        if last < 0 or len(messages) <= last or messages[last].get("role") == "assistant":
            return False
        if list(messages[:last]) == list(stored[:last]):
            return True
        return self.matcher.match_prefix(stored[:last], messages[:last], ResendMatch()) is None

    def _rewritten_reply(
        self, conversation: Conversation, messages: Sequence[Message]
    ) -> tuple[int, ResendMatch] | None:
        """Under `harness`, in a linear conversation the request left (its plan replaces the head, or is refused):
        where the request resends a stored assistant reply as another assistant message that no rule matches
        (smolagents' `ToolCallingAgent` resends its tool calls as "Calling tools:" text), the node holding that reply
        and how the messages before it matched; None otherwise.

        A linear conversation cannot hold that history beside its own without dropping a sampled turn, so the
        request opens a conversation of its own that `continues` this one, `forked_from` that node: a branch that
        loses nothing. A tree conversation holds it as a branch itself; `strict` refuses it."""
        trajectory = conversation.trajectory
        if self.matcher.name != "harness" or not isinstance(trajectory, LinearTrajectory):
            return None
        stored = trajectory.messages()
        found = ResendMatch()
        difference = self.matcher.match_prefix(stored, messages, found)
        index = len(stored) if difference is None else difference[0]
        if index >= min(len(stored), len(messages)):
            return None
        if stored[index].get("role") != "assistant" or messages[index].get("role") != "assistant":
            return None
        end = 0
        for turn in trajectory.turns():
            end += len(turn.request_messages) + 1
            if index < end:
                return turn.node_id, found
        return None

    def _open(
        self,
        messages: Sequence[Message],
        tools: Sequence[Message] | None,
        fingerprint: str,
        opening: ConversationOpening,
    ) -> TurnPlan:
        plan = self._blank.plan(messages, tools, fingerprint, False)
        return with_changes(plan, conversation=None, opening=opening, resend=None, branched=False)

    def _continued_compaction(self, messages: Sequence[Message]) -> Conversation | None:
        """The latest compaction conversation whose reply (the summary) the request carries in a message: the whole
        reply, or what its `<summary>` block holds (Claude Code drops the `<analysis>` block and resends only that,
        under "Summary:")."""
        kinds = self._kinds()
        for conversation in reversed(self.conversations.values()):
            if kinds[conversation.conversation_id] != "compaction":
                continue
            stored = conversation.latest_messages()
            summaries = _summaries(_text(stored[-1])) if stored else []
            if any(summary in _text(message) for summary in summaries for message in messages):
                return conversation
        return None

    def _subject_of(self, compaction: Conversation) -> str | None:
        """The conversation a compaction summarised: the one it forked from, or its stated parent."""
        opening = compaction.opening
        if opening.forked_from is not None:
            return self._node_conversation.get(opening.forked_from)
        return self._latest_with_key(opening.parent_key, compaction.conversation_id)

    def check(self, plan: TurnPlan) -> None:
        """Under the session lock: a turn that extends a conversation checks only that conversation's plan; one
        that opens a conversation conflicts with nothing."""
        if plan.conversation is not None:
            self.conversations[plan.conversation].trajectory.check(plan)
        self._check_capacity()

    def _check_capacity(self) -> None:
        max_nodes = self.config.max_nodes
        if self.config.trajectory is TrajectoryKind.TREE and max_nodes is not None and len(self.store) >= max_nodes:
            raise TreeCapacityError(max_nodes)

    def stamp(self, plan: TurnPlan, event: TurnCommitted) -> TurnCommitted:
        """Under the session lock, after `check`: the event with its node id and conversation (a new one's id is
        minted here, so concurrent openings get distinct ids)."""
        if plan.conversation is None:
            conversation_id = f"c{len(self.conversations)}"
            return with_changes(event, node_id=self.next_node_id, conversation_id=conversation_id, opening=plan.opening)
        return with_changes(event, node_id=self.next_node_id, conversation_id=plan.conversation, opening=None)

    def apply(self, event: TurnCommitted) -> None:
        conversation_id = event.conversation_id
        if event.opening is not None:
            if conversation_id in self.conversations:
                raise TrajectoryIntegrityError(f"turn {event.node_id} opens conversation {conversation_id} again")
            conversation = Conversation(conversation_id, event.opening, new_conversation_trajectory(self.config))
            self.conversations[conversation_id] = conversation
            if event.opening.key is not None:
                self._by_key.setdefault(event.opening.key, []).append(conversation_id)
        else:
            found = self.conversations.get(conversation_id)
            if found is None and conversation_id == FIRST_CONVERSATION and not self.conversations:
                # journaled before sessions held conversations: the session's one conversation
                opening = ConversationOpening(source="prefix", has_tools=bool(event.tools))
                found = Conversation(conversation_id, opening, new_conversation_trajectory(self.config))
                self.conversations[conversation_id] = found
            if found is None:
                raise TrajectoryIntegrityError(f"turn {event.node_id} names unknown conversation {conversation_id}")
            conversation = found
        if event.node_id < self.next_node_id:
            raise TrajectoryIntegrityError(f"node id {event.node_id} was already used in this session")
        event = SHARED.share(event)  # tools and repeated metadata held once, live or replayed
        conversation.trajectory.apply(event)
        self._node_conversation[event.node_id] = conversation_id
        self._by_fingerprint[event.request_fingerprint] = conversation_id
        self.next_node_id = event.node_id + 1

    def recent_replies(self, count: int) -> list[Message]:
        """The stored replies of the last `count` commits still stored, the most recent first: what a resent body
        most likely repeats (the server's body reader keeps these objects, not equal copies of its own)."""
        replies = []
        for node_id in range(self.next_node_id - 1, max(self.next_node_id - count, 0) - 1, -1):
            conversation = self.conversation_of(node_id)
            if conversation is not None:
                replies.append(conversation.trajectory.store.get(node_id).turn.assistant)
        return replies

    def path_ids(self, node_id: int) -> array[int]:
        conversation = self.conversation_of(node_id)
        if conversation is None:
            raise TrajectoryIntegrityError(f"node {node_id} is not in this session")
        return conversation.trajectory.path_ids(node_id)

    def sample_sequences(self) -> list[PathSequence]:
        """Every conversation's path sequences, conversations in opening order."""
        return [sequence for c in self.conversations.values() for sequence in c.trajectory.sample_sequences()]

    def postprocess_samples(self, samples: Sequence[T]) -> list[T]:
        """Unchanged: each conversation's post-processor runs on its own samples (`trajectory.samples`)."""
        return list(samples)

    def _latest_with_key(self, key: str | None, before: str) -> str | None:
        """The latest conversation with `key` opened before `before`."""
        order = list(self.conversations)
        limit = order.index(before) if before in self.conversations else len(order)
        ids = [c for c in self._by_key.get(key or "", ()) if order.index(c) < limit]
        return ids[-1] if ids else None

    def _main(self) -> str | None:
        """The main loop: the first conversation stated `main`; else the first unlabelled one (no stated kind, not
        a fork or continuation) that sent tools; else the first unlabelled one that asked no structured output."""
        unlabelled = [
            c
            for c in self.conversations.values()
            if c.opening.kind is None
            and c.opening.forked_from is None
            and c.opening.continues is None
            and c.opening.compaction is None
        ]
        for candidates in (
            [c for c in self.conversations.values() if c.opening.kind == "main"],
            [c for c in unlabelled if c.opening.has_tools],
            [c for c in unlabelled if not c.opening.structured_output],
        ):
            if candidates:
                return candidates[0].conversation_id
        return None

    def _kinds(self) -> dict[str, str]:
        main = self._main()
        kinds: dict[str, str] = {}
        for conversation in self.conversations.values():
            opening = conversation.opening
            if opening.kind is not None:
                kind = opening.kind
            elif opening.continues is not None and opening.continues in kinds:
                kind = kinds[opening.continues]
            elif opening.forked_from is not None:
                kind = "compaction"
            elif conversation.conversation_id == main:
                kind = "main"
            else:
                kind = "subagent" if opening.has_tools else "side"
            kinds[conversation.conversation_id] = kind
        return kinds

    def conversation_infos(self) -> dict[str, ConversationInfo]:
        """Each conversation's label. Kind: the stated one; a continuation (after a compaction, or of a rewritten
        history) has the kind of the conversation it continues; any other fork is a `compaction`; the main loop
        (`_main`) is `main`; any other is a `subagent` when it sent tools, else `side`. Parent: a continuation's is
        the parent of the one it continues; a compaction fork's is its subject; else the stated parent key's latest
        conversation (the main loop when the key is unknown); else the main loop (none for the main loop itself)."""
        main = self._main()
        kinds = self._kinds()
        infos: dict[str, ConversationInfo] = {}
        for conversation in self.conversations.values():
            conversation_id = conversation.conversation_id
            opening = conversation.opening
            parent: str | None
            if opening.continues is not None:
                parent = infos[opening.continues].parent if opening.continues in infos else None
            elif opening.forked_from is not None:
                parent = self._node_conversation.get(opening.forked_from)
            elif opening.parent_key is not None:
                parent = self._latest_with_key(opening.parent_key, conversation_id) or main
            else:
                parent = None if kinds[conversation_id] == "main" else main
            if parent == conversation_id:
                parent = None
            spawned_by = opening.spawned_by
            if spawned_by is None and kinds[conversation_id] == "subagent" and parent in self.conversations:
                spawned_by = _spawning_call(self.conversations[parent], conversation)
            infos[conversation_id] = ConversationInfo(
                conversation_id=conversation_id,
                kind=kinds[conversation_id],
                parent=parent,
                spawned_by=spawned_by,
                inferred=opening.key is None,
                source=opening.source,
                key=opening.key,
                continues=opening.continues,
                compaction=opening.compaction,
                forked_from=opening.forked_from,
            )
        return infos

    def describe(self) -> Mapping[str, Any]:
        """The main conversation's description (as a one-conversation session's), and every conversation's label
        and counts under `conversations`."""
        infos = self.conversation_infos()
        main = self._main() or next(iter(self.conversations), None)
        base = self.conversations[main].trajectory.describe() if main is not None else self._blank.describe()
        listed = []
        for conversation in self.conversations.values():
            nodes = list(conversation.trajectory.store)
            listed.append(
                {
                    **infos[conversation.conversation_id].as_json(),
                    "turns": len(nodes),
                    "sampled_tokens": sum(len(node.turn.output_ids) for node in nodes),
                    "messages": len(conversation.latest_messages()),
                }
            )
        return {**base, "conversations": listed}


def _common_prefix(stored: Sequence[Message], sent: Sequence[Message]) -> int:
    count = 0
    for a, b in zip(stored, sent, strict=False):
        if a != b:
            break
        count += 1
    return count


def _text(message: Message) -> str:
    """A message's text: its string content, or its text parts joined."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text") or "") for part in content if isinstance(part, Mapping))
    return ""


def _summaries(reply: str) -> list[str]:
    """The texts a continuation may carry of a compaction's reply: the reply itself and each `<summary>` block's
    content, stripped (empty ones left out)."""
    texts = [reply, *_SUMMARY_BLOCK.findall(reply)]
    return [text.strip() for text in texts if text.strip()]


def _spawning_call(parent: Conversation, child: Conversation) -> str | None:
    """The parent's latest tool call with an argument string that the child's first user message contains."""
    first_user = next((m for m in child.opening_messages() if m.get("role") == "user"), None)
    text = "" if first_user is None else _text(first_user)
    if not text:
        return None
    for node in sorted(parent.trajectory.store, key=lambda node: node.node_id, reverse=True):
        for call in reversed(node.turn.assistant.get("tool_calls") or ()):
            arguments = (call.get("function") or {}).get("arguments")
            if any(len(value) >= _SPAWN_TEXT_MIN and value in text for value in _strings(arguments)):
                return str(call.get("id"))
    return None


def _strings(arguments: Any) -> Iterator[str]:
    """The stripped string values inside tool-call arguments (a JSON string or an object)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            yield arguments.strip()
            return
    if isinstance(arguments, str):
        yield arguments.strip()
    elif isinstance(arguments, Mapping):
        for value in arguments.values():
            yield from _strings(value) if not isinstance(value, str) else iter((value.strip(),))
    elif isinstance(arguments, list):
        for value in arguments:
            yield from _strings(value) if not isinstance(value, str) else iter((value.strip(),))
