"""The dialect routes on a session: Anthropic Messages (`/v1/messages`, `/v1/messages/count_tokens`) and OpenAI
Responses (`/v1/responses`). Each translates its body into the internal chat request, runs the chat path's steps
(`prepare_turn`, then `complete_turn` or the streaming core with the dialect's encoder) and translates the
committed turn back; every error leaves in the dialect's own shape.

Imports from tito: errors, server.completions, server.dialects, server.replies, server.state, server.streaming,
trajectory.events.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response

from tito.errors import TitoError
from tito.server.completions import PreparedTurn, complete_turn, fingerprint, is_sdk_retry, prepare_turn
from tito.server.dialects import anthropic, responses
from tito.server.dialects.anthropic_stream import AnthropicStreamEncoder
from tito.server.dialects.edge import labeller, new_id
from tito.server.dialects.responses_stream import ResponsesStreamEncoder
from tito.server.dialects.signing import RoundTripSigner
from tito.server.replies import error_response, json_response, read_body
from tito.server.state import ServerState
from tito.server.streaming import SseResponse, StreamEncoder, replay_committed, stream_turn
from tito.trajectory.events import TurnCommitted

ErrorShape = Callable[[Exception], tuple[dict[str, Any], int]]
EncoderFactory = Callable[[str, int], StreamEncoder]
"""A dialect's stream encoder for a response id and the prompt's token count."""


def register_dialect_routes(app: FastAPI, state: ServerState) -> None:
    signer = RoundTripSigner.for_journal(state.options.journal)
    registry = state.registry
    limit = state.options.max_body_bytes

    async def in_shape(shape: ErrorShape, handler: Callable[[], Any]) -> Response:
        try:
            response: Response = await handler()
            return response
        except Exception as exc:
            state.metrics.errors.labels(type(exc).__name__ if isinstance(exc, TitoError) else "InternalError").inc()
            body, status = shape(exc)
            return error_response(body, status)

    def streamed(
        prepared: PreparedTurn | TurnCommitted, request: Request, prefix: str, encoder_for: EncoderFactory
    ) -> Response:
        """The turn streamed by the dialect's encoder, or a committed turn (an SDK retry) streamed again."""
        if isinstance(prepared, TurnCommitted):
            prompt_tokens = int(prepared.metadata.get("prompt_tokens", 0))
            return SseResponse(replay_committed(prepared, encoder_for(prepared.response_id, prompt_tokens)))
        encoder = encoder_for(new_id(prefix), len(prepared.prompt_ids))
        return SseResponse(stream_turn(state, prepared, request.receive, encoder))

    @app.post("/sessions/{session_id}/v1/messages")
    async def anthropic_messages(session_id: str, request: Request) -> Response:
        async def handle() -> Response:
            started = time.monotonic()
            session = registry.get(session_id)
            body = await read_body(request, limit)
            asked = anthropic.parse_request(body)
            chat = anthropic.chat_request(asked, session, signer, state.tokenizers.family)
            prepared = await prepare_turn(state, session, chat, fingerprint(body), is_sdk_retry(request.headers))
            if asked.stream:

                def encoder(response_id: str, prompt_tokens: int) -> StreamEncoder:
                    return AnthropicStreamEncoder(state.model_name, session_id, response_id, prompt_tokens, signer)

                return streamed(prepared, request, "msg", encoder)
            if isinstance(prepared, PreparedTurn):
                label = labeller(new_id("msg"), anthropic.DIALECT)
                prepared = await complete_turn(state, prepared, request.receive, started, label)
            return json_response(anthropic.message_body(prepared, state.model_name, signer))

        return await in_shape(anthropic.error_body, handle)

    @app.post("/sessions/{session_id}/v1/messages/count_tokens")
    async def anthropic_count_tokens(session_id: str, request: Request) -> Response:
        async def handle() -> Response:
            session = registry.get(session_id)
            body = await read_body(request, limit)
            asked = anthropic.parse_request(body, needs_max_tokens=False)
            chat = anthropic.chat_request(asked, session, signer, state.tokenizers.family)
            try:  # the prompt ids the turn would run on, attached where planning attaches it
                prepared = await prepare_turn(state, session, chat, fingerprint(body), False)
                count = len(prepared.prompt_ids) if isinstance(prepared, PreparedTurn) else 0
            except TitoError:  # a conversation the session cannot extend: its ids rendered whole
                tito_tokenizer = state.tokenizers.get(
                    session.config.chat_template_kwargs, chat.chat_template_kwargs, session.config.allowed_append_roles
                )
                count = len(tito_tokenizer.merge_tokens([], chat.messages, array("i"), chat.tools))
            return json_response({"input_tokens": count})

        return await in_shape(anthropic.error_body, handle)

    @app.post("/sessions/{session_id}/v1/responses")
    async def openai_responses(session_id: str, request: Request) -> Response:
        async def handle() -> Response:
            started = time.monotonic()
            session = registry.get(session_id)
            body = await read_body(request, limit)
            asked = responses.parse_request(body)
            chat = responses.chat_request(asked, session, signer, state.tokenizers.family)
            prepared = await prepare_turn(state, session, chat, fingerprint(body), is_sdk_retry(request.headers))
            echo = responses.echo_fields(asked)
            if asked.stream:

                def encoder(response_id: str, prompt_tokens: int) -> StreamEncoder:
                    return ResponsesStreamEncoder(state.model_name, session_id, response_id, echo, signer)

                return streamed(prepared, request, "resp", encoder)
            if isinstance(prepared, PreparedTurn):
                label = labeller(new_id("resp"), responses.DIALECT)
                prepared = await complete_turn(state, prepared, request.receive, started, label)
            return json_response(responses.response_body(prepared, state.model_name, echo, signer))

        return await in_shape(responses.error_body, handle)
