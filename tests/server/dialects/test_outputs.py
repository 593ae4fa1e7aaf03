"""DeltaParts: an assistant message's deltas routed into a dialect's reply parts, in order."""

from __future__ import annotations

from tito.parsing.incremental import Delta, ToolCallDelta
from tito.server.dialects.outputs import DeltaParts, Events


class Recorded(DeltaParts):
    """Each part as (kind, text); every open and close written as an event."""

    REASONING = "reasoning"
    TEXT = "text"

    def __init__(self) -> None:
        super().__init__()
        self.kinds: list[str] = []

    def parts(self) -> list[tuple[str, str]]:
        return [(kind, "".join(parts)) for kind, parts in zip(self.kinds, self._parts, strict=True)]

    def _open_part(self, kind: str, events: Events) -> None:
        self._start(kind, events)

    def _open_call(self, call: ToolCallDelta, events: Events) -> None:
        self._start(f"call {call.id} {call.name}", events)

    def _start(self, kind: str, events: Events) -> None:
        self.kinds.append(kind)
        self._parts.append([])
        self._open = kind
        self._delta_head = b"+"
        if events is not None:
            events.append(b"open " + kind.encode())

    def _close(self, events: Events) -> None:
        if self._open is not None and events is not None:
            events.append(b"close " + self._open.encode())
        self._open = None


def test_reasoning_text_and_calls_continue_or_open_parts_in_order() -> None:
    deltas = [
        Delta(reasoning_content="let me "), Delta(reasoning_content="think"), Delta(content="Running"),
        Delta(tool_call=ToolCallDelta(0, "c1", "run")), Delta(tool_call=ToolCallDelta(0, arguments='{"a": ')),
        Delta(tool_call=ToolCallDelta(0, arguments="1}")), Delta(tool_call=ToolCallDelta(1, "c2", "run", "{}")),
        Delta(content="done"),
    ]  # fmt: skip
    streamed, whole = Recorded(), Recorded()
    events: list[bytes] = []
    streamed.feed(deltas[:4], events)
    streamed.feed(deltas[4:], events)
    streamed.close(events)
    whole.feed(deltas, None)
    whole.close(None)
    expected = [("reasoning", "let me think"), ("text", "Running"), ("call c1 run", '{"a": 1}'), ("call c2 run", "{}"),
                ("text", "done")]  # fmt: skip
    assert streamed.parts() == whole.parts() == expected
    assert events == [
        b"open reasoning", b'+"let me "', b'+"think"', b"close reasoning", b"open text", b'+"Running"', b"close text",
        b"open call c1 run", b'+"{\\"a\\": "', b'+"1}"', b"close call c1 run", b"open call c2 run", b'+"{}"',
        b"close call c2 run", b"open text", b'+"done"', b"close text",
    ]  # fmt: skip
