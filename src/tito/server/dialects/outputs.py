"""A dialect reply's parts (Anthropic content blocks, Responses output items) built from the assistant message's deltas:
the routing both dialects share, whole reply or stream.

Reasoning and text each continue the open part or open one of their kind; a tool call's first delta (the one with
its id) opens a part, and its arguments continue it. A subclass says what opening and closing a part write; the
delta that continues the open part is the hot path: its event's head is encoded once when the part opens.

Imports from tito: parsing.incremental.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import orjson

from tito.parsing.incremental import Delta, ToolCallDelta

Events = list[bytes] | None
"""Where a builder appends stream events as SSE bytes (None: a whole reply, no events)."""


class DeltaParts(ABC):
    REASONING: str
    """The part kind reasoning goes into."""
    TEXT: str
    """The part kind text goes into."""
    DELTA_END = b""
    """What ends a continuing delta's event after its JSON text."""

    def __init__(self) -> None:
        self._parts: list[list[str]] = []
        self._open: str | None = None
        self._delta_head = b""

    def feed(self, deltas: Sequence[Delta], events: Events) -> None:
        for delta in deltas:
            if delta.reasoning_content is not None:
                self._into(self.REASONING, events)
                self._add(delta.reasoning_content, events)
            elif delta.content is not None:
                self._into(self.TEXT, events)
                self._add(delta.content, events)
            elif delta.tool_call is not None:
                call = delta.tool_call
                if call.id is not None:
                    self._close(events)
                    self._open_call(call, events)
                if call.arguments:
                    self._add(call.arguments, events)

    def close(self, events: Events) -> None:
        self._close(events)

    def _into(self, kind: str, events: Events) -> None:
        if self._open != kind:
            self._close(events)
            self._open_part(kind, events)

    def _add(self, text: str, events: Events) -> None:
        self._parts[-1].append(text)
        if events is not None:
            events.append(self._delta_head + orjson.dumps(text) + self.DELTA_END)

    @abstractmethod
    def _open_part(self, kind: str, events: Events) -> None:
        """Open a reasoning or text part."""

    @abstractmethod
    def _open_call(self, call: ToolCallDelta, events: Events) -> None:
        """Open a tool call's part."""

    @abstractmethod
    def _close(self, events: Events) -> None:
        """Close the open part, if any."""
