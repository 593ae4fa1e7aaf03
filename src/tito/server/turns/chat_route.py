"""`POST /sessions/{id}/v1/chat/completions`: an OpenAI chat turn, whole or streamed, through the turn path's steps
(prepare, generate, finish); a retry of a committed turn answers that turn again.

Imports from tito: server.replies, server.sessions, server.state, server.turns, trajectory.events.
"""

from __future__ import annotations

import time

from fastapi import APIRouter, Request
from fastapi.responses import Response

from tito.server.replies import header_values, json_response, read_body
from tito.server.sessions.lineage import lineage_of
from tito.server.state import ServerState
from tito.server.turns.completions import complete_turn, prepare_turn, read_chat_body, reply_body
from tito.server.turns.logprobs import choice_logprobs
from tito.server.turns.retries import request_key
from tito.server.turns.streaming import streamed_reply
from tito.trajectory.events import TurnCommitted


def chat_routes(state: ServerState) -> APIRouter:
    router = APIRouter()
    tokenizer = state.tokenizers.tokenizer

    @router.post("/sessions/{session_id}/v1/chat/completions")
    async def chat_completions(session_id: str, request: Request) -> Response:
        started = time.monotonic()
        session = state.registry.get(session_id)
        body = await read_body(request, state.options.max_body_bytes)
        read = read_chat_body(session, body)  # only the new messages parsed when the body resends the previous one
        chat = read.request
        headers = header_values(request)
        key = request_key(body, headers, read.digest)
        lineage = lineage_of(headers, chat.messages)
        prepared = await prepare_turn(state, session, chat, key.fingerprint, key.is_retry, lineage)
        if chat.stream:
            return streamed_reply(state, chat, prepared, request.receive, started)
        if isinstance(prepared, TurnCommitted):
            stored = choice_logprobs(chat, tokenizer, prepared.output_ids, prepared.output_logprobs)
            return json_response(reply_body(prepared, state.reply_model(chat.model), stored))
        completed = await complete_turn(state, prepared, request.receive, started)
        final, generation = completed.turn, completed.generation
        tops = generation.top_logprobs if final.output_ids == generation.output_ids else ()
        logprobs = choice_logprobs(chat, tokenizer, final.output_ids, final.output_logprobs, tops)
        return json_response(reply_body(final, state.reply_model(chat.model), logprobs))

    return router
