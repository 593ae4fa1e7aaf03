"""Anthropic's stream of one turn (`stream: true`), written as the engine samples by the dialect-neutral core
(server.turns.streaming): `message_start` (in the same send as the engine's first events), then per engine chunk
the `content_block_start` / `content_block_delta` (`thinking_delta`, `text_delta`, `input_json_delta`) /
`content_block_stop` events its deltas make (a thinking block ends with its `signature_delta`), and once the turn
is committed `message_delta` (`stop_reason`, usage) and `message_stop`. A failure is an `event: error` in
Anthropic's shape, which the anthropic SDK raises. The blocks are `anthropic.Blocks`'s, as in the whole reply, so
the SDK's accumulated message equals it.

Imports from tito: engines.protocol, parsing.incremental, server.dialects, trajectory.events.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tito.engines.protocol import GenerationChunk
from tito.parsing.incremental import Delta
from tito.server.dialects.anthropic import DIALECT, Blocks, error_body, sse, stop_reason, tito_facts, usage
from tito.server.dialects.edge import turn_label
from tito.server.dialects.signing import RoundTripSigner
from tito.trajectory.events import TurnCommitted


class AnthropicStreamEncoder:
    """A `server.turns.streaming.StreamEncoder` writing Anthropic Messages events."""

    def __init__(
        self, model: str, session_id: str, response_id: str, prompt_tokens: int, signer: RoundTripSigner
    ) -> None:
        self.model = model
        self.response_id = response_id
        self.prompt_tokens = prompt_tokens
        self.blocks = Blocks(signer.signing(session_id, response_id))
        self.label = turn_label(response_id, DIALECT)

    def opening(self) -> list[bytes]:
        message: dict[str, Any] = {
            "id": self.response_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": self.prompt_tokens, "output_tokens": 0},
        }
        return [sse({"type": "message_start", "message": message})]

    def chunk(self, deltas: Sequence[Delta], chunk: GenerationChunk) -> bytes:
        if not deltas:
            return b""
        events: list[bytes] = []
        self.blocks.feed(deltas, events)
        return b"".join(events)

    def closing(self, deltas: Sequence[Delta], turn: TurnCommitted) -> list[bytes]:
        events: list[bytes] = []
        self.blocks.feed(deltas, events)
        self.blocks.close(events)
        reason, sequence = stop_reason(turn)
        message_delta = {
            "type": "message_delta",
            "delta": {"stop_reason": reason, "stop_sequence": sequence},
            "usage": usage(turn),
            "tito": tito_facts(turn),
        }
        events += (sse(message_delta), sse({"type": "message_stop"}))
        return events

    def failure(self, exc: Exception) -> bytes:
        return sse(error_body(exc)[0])
