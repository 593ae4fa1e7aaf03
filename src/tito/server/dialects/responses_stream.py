"""The Responses stream of one turn (`stream: true`, the only way Codex reads a reply), written as the engine
samples by the dialect-neutral core (server.turns.streaming): `response.created` and `response.in_progress` (in the
same send as the engine's first events); per engine chunk the events its deltas make (`response.output_item.added`,
`response.reasoning_text.delta`, `response.content_part.added`, `response.output_text.delta`,
`response.function_call_arguments.delta`, each item's `.done` events and `response.output_item.done`); once the
turn is committed `response.completed` (or `response.incomplete` when cut by length) with the whole response.
Every event carries its `sequence_number`. A failure is `response.failed` then an `event: error` in OpenAI's
shape (Codex reads the first, the openai SDK raises the second). The items are `responses.Items`'s, as in the
whole reply, so the SDK's accumulated response equals it.

Imports from tito: engines.protocol, parsing.incremental, server.dialects, trajectory.events.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import orjson

from tito.engines.protocol import GenerationChunk
from tito.parsing.incremental import Delta
from tito.server.dialects.edge import turn_label
from tito.server.dialects.responses import DIALECT, Items, RequestTools, error_body, finished, response_object
from tito.server.dialects.signing import RoundTripSigner
from tito.trajectory.events import TurnCommitted


class ResponsesStreamEncoder:
    """A `server.turns.streaming.StreamEncoder` writing Responses events."""

    def __init__(
        self,
        model: str,
        session_id: str,
        response_id: str,
        echo: dict[str, Any],
        signer: RoundTripSigner,
        tools: RequestTools,
    ) -> None:
        self.model = model
        self.response_id = response_id
        self.echo = echo
        self.items = Items(response_id, signer.signing(session_id, response_id), tools.namespaces)
        self.created_at = time.time()
        self.label = turn_label(response_id, DIALECT, tools.recorded())
        self._sequence = 0

    def opening(self) -> list[bytes]:
        response = orjson.dumps(self._response())  # written once for both events
        return [
            *self._with_response("response.created", response),
            *self._with_response("response.in_progress", response),
        ]

    def chunk(self, deltas: Sequence[Delta], chunk: GenerationChunk) -> bytes:
        if not deltas:
            return b""
        events: list[bytes] = []
        self.items.feed(deltas, events)
        return b"".join(self._numbered(events))

    def closing(self, deltas: Sequence[Delta], turn: TurnCommitted) -> list[bytes]:
        events: list[bytes] = []
        self.items.feed(deltas, events)
        self.items.close(events)
        response = finished(self._response(), turn)
        kind = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
        return [*self._numbered(events), *self._with_response(kind, orjson.dumps(response))]

    def failure(self, exc: Exception) -> bytes:
        body, _ = error_body(exc)
        error = body["error"]
        failed = {**self._response(), "status": "failed", "error": {"code": error["type"], "message": error["message"]}}
        return b"".join(
            (
                *self._with_response("response.failed", orjson.dumps(failed)),
                b"event: error\ndata: ",
                orjson.dumps({"type": "error", **body, "sequence_number": self._sequence}),
                b"\n\n",
            )
        )

    def _response(self) -> dict[str, Any]:
        return response_object(self.response_id, self.model, self.created_at, self.echo, list(self.items.items))

    def _numbered(self, events: list[bytes]) -> list[bytes]:
        """`Items`'s open events, each closed with its sequence number."""
        closed = []
        for event in events:
            closed.append(event + b',"sequence_number":%d}\n\n' % self._sequence)
            self._sequence += 1
        return closed

    def _with_response(self, kind: str, response: bytes) -> tuple[bytes, bytes, bytes]:
        """The event `kind` carrying a `response` (JSON), in pieces around it: a response repeats the request's
        instructions and tools (hundreds of kilobytes for a coding agent), copied once, where the send's pieces are
        joined."""
        self._sequence += 1
        return (
            b'event: %s\ndata: {"type":"%s","response":' % (kind.encode(), kind.encode()),
            response,
            b',"sequence_number":%d}\n\n' % (self._sequence - 1),
        )
