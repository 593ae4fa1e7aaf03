"""The dialect routes on a session: Anthropic Messages (`/v1/messages`, `/v1/messages/count_tokens`) and OpenAI
Responses (`/v1/responses`). Each translates its body into the internal chat request, runs the chat path's steps
(`prepare_turn`, then `complete_turn` or the streaming core with the dialect's encoder) and translates the
committed turn back; every error leaves in the dialect's own shape. `HEAD` on a session's base URLs answers the
connectivity probe agents send first.

Imports from tito: errors, server.dialects, server.errors, server.models, server.replies, server.sessions,
server.state, server.turns, trajectory.events.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from tito.errors import TitoError
from tito.server.dialects import anthropic, responses
from tito.server.dialects.anthropic_stream import AnthropicStreamEncoder
from tito.server.dialects.edge import new_id, turn_label
from tito.server.dialects.responses_stream import ResponsesStreamEncoder
from tito.server.dialects.signing import RoundTripSigner
from tito.server.models import ChatCompletionRequest
from tito.server.replies import ErrorShape, error_reply, header_values, json_response, read_body
from tito.server.sessions.lineage import lineage_of
from tito.server.sessions.registry import Session
from tito.server.sessions.resent_prefix import ResentPrefix
from tito.server.state import ServerState
from tito.server.turns.completions import PreparedTurn, TurnPrompt, complete_turn, plan_prompt, prepare_turn
from tito.server.turns.retries import request_key, unmarked_key
from tito.server.turns.streaming import SseResponse, StreamEncoder, replay_committed, stream_turn
from tito.trajectory.events import TurnCommitted

EncoderFactory = Callable[[str, int], StreamEncoder]
"""A dialect's stream encoder for a response id and the prompt's token count."""


@dataclass(frozen=True)
class DialectTurn:
    """What one dialect request asks, translated: the internal chat request and how to write the replies."""

    chat: ChatCompletionRequest
    stream: bool
    id_prefix: str
    """The dialect's response id prefix (`msg`, `resp`)."""
    dialect: str
    """Recorded as the turn's `metadata["dialect"]`."""
    encoder: EncoderFactory
    reply: Callable[[TurnCommitted], dict[str, Any]]
    """The whole reply of a committed turn."""
    recorded: Mapping[str, Any] = field(default_factory=dict)
    """What the turn records of the request beyond its prompt (its metadata), e.g. the hosted tools left out."""
    digest: Any = None
    """The body's xxh3-128 fingerprint state, computed as it was read (server.sessions.resent_prefix)."""


Translate = Callable[[bytes, Session], DialectTurn]


def dialect_routes(state: ServerState) -> APIRouter:
    router = APIRouter()
    signer = RoundTripSigner.for_journal(state.options.journal)
    registry = state.registry
    limit = state.options.max_body_bytes

    async def in_shape(shape: ErrorShape, handler: Callable[[], Awaitable[Response]]) -> Response:
        try:
            return await handler()
        except Exception as exc:
            return error_reply(exc, shape, state.metrics)

    def streamed(
        prepared: PreparedTurn | TurnCommitted, request: Request, asked: DialectTurn, started: float
    ) -> Response:
        """The turn streamed by the dialect's encoder, or a committed turn (an SDK retry) streamed again."""
        if isinstance(prepared, TurnCommitted):
            prompt_tokens = int(prepared.metadata.get("prompt_tokens", 0))
            return SseResponse(replay_committed(prepared, asked.encoder(prepared.response_id, prompt_tokens)))
        encoder = asked.encoder(new_id(asked.id_prefix), len(prepared.prompt_ids))
        return SseResponse(stream_turn(state, prepared, request.receive, started, encoder))

    async def run_turn(session_id: str, request: Request, translate: Translate) -> Response:
        """One turn of any dialect: the chat path's steps on the translated request, the reply in the dialect."""
        started = time.monotonic()
        session = registry.get(session_id)
        body = await read_body(request, limit)
        asked = translate(body, session)
        headers = header_values(request)
        key = request_key(body, headers, asked.digest)
        lineage = lineage_of(headers, asked.chat.messages)
        prepared = await prepare_turn(state, session, asked.chat, key.fingerprint, key.is_retry, lineage)
        if asked.stream:
            return streamed(prepared, request, asked, started)
        if isinstance(prepared, PreparedTurn):
            label = turn_label(new_id(asked.id_prefix), asked.dialect, asked.recorded)
            prepared = (await complete_turn(state, prepared, request.receive, started, label)).turn
        return json_response(asked.reply(prepared))

    def reader_of(session: Session, dialect: str, reader: Callable[[], ResentPrefix[Any]]) -> ResentPrefix[Any]:
        """The session's reader of `dialect`'s bodies: each read from the previous one's prefix where it is one."""
        prefix = session.resent_bodies.get(dialect)
        if prefix is None:
            prefix = session.resent_bodies[dialect] = reader()
        return prefix

    def anthropic_turn(body: bytes, session: Session) -> DialectTurn:
        reader = reader_of(session, anthropic.DIALECT, anthropic.body_reader)
        got = reader.read(body)
        asked = got.request
        model = state.reply_model(asked.model)
        return DialectTurn(
            anthropic.chat_request_reusing(
                asked, session, signer, state.tokenizers.family, lambda: reader.read_whole(body).request
            ),
            bool(asked.stream),
            "msg",
            anthropic.DIALECT,
            lambda response_id, prompt_tokens: AnthropicStreamEncoder(
                model, session.session_id, response_id, prompt_tokens, signer
            ),
            lambda turn: anthropic.message_body(turn, model, signer),
            digest=got.digest,
        )

    def responses_turn(body: bytes, session: Session) -> DialectTurn:
        reader = reader_of(session, responses.DIALECT, responses.body_reader)
        got = reader.read(body)
        asked = got.request
        tools = responses.request_tools_reusing(asked, session)
        echo = responses.echo_fields(asked, tools)
        model = state.reply_model(asked.model)
        return DialectTurn(
            responses.chat_request_reusing(
                asked, tools, session, signer, state.tokenizers.family, lambda: reader.read_whole(body).request
            ),
            bool(asked.stream),
            "resp",
            responses.DIALECT,
            lambda response_id, _: ResponsesStreamEncoder(model, session.session_id, response_id, echo, signer, tools),
            lambda turn: responses.response_body(turn, model, echo, signer, tools.namespaces),
            tools.recorded(),
            got.digest,
        )

    async def probe(session_id: str) -> Response:
        """`HEAD` on a session's base URL: the connectivity probes Claude Code sends first (`{base}`, and
        `{base}/api/hello` when non-essential traffic is allowed): 200 while the session lives."""
        registry.get(session_id)  # an unknown session is a 404
        return Response(status_code=200)

    for base in ("/sessions/{session_id}", "/sessions/{session_id}/v1", "/sessions/{session_id}/api/hello"):
        router.add_api_route(base, probe, methods=["HEAD"], include_in_schema=False)

    @router.post("/sessions/{session_id}/v1/messages")
    async def anthropic_messages(session_id: str, request: Request) -> Response:
        return await in_shape(anthropic.error_body, lambda: run_turn(session_id, request, anthropic_turn))

    @router.post("/sessions/{session_id}/v1/messages/count_tokens")
    async def anthropic_count_tokens(session_id: str, request: Request) -> Response:
        async def handle() -> Response:
            session = registry.get(session_id)
            body = await read_body(request, limit)
            asked = anthropic.parse_request(body, needs_max_tokens=False)
            chat = anthropic.chat_request(asked, session, signer, state.tokenizers.family)
            try:  # the prompt ids the turn would run on, attached where planning attaches it (no resend counted)
                lineage = lineage_of(request.headers, chat.messages)
                prompt = await plan_prompt(state, session, chat, unmarked_key(body).fingerprint, False, lineage)
                count = len(prompt.prompt_ids) if isinstance(prompt, TurnPrompt) else 0
            except TitoError:  # a conversation the session cannot extend: its ids rendered whole
                tito_tokenizer = state.tokenizers.get(
                    session.config.chat_template_kwargs, chat.chat_template_kwargs, session.config.allowed_append_roles
                )
                count = len(tito_tokenizer.merge_tokens([], chat.messages, array("i"), chat.tools))
            return json_response({"input_tokens": count})

        return await in_shape(anthropic.error_body, handle)

    @router.post("/sessions/{session_id}/v1/responses")
    async def openai_responses(session_id: str, request: Request) -> Response:
        return await in_shape(responses.error_body, lambda: run_turn(session_id, request, responses_turn))

    return router
