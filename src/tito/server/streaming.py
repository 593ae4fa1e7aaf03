"""Streamed chat turns (`stream: true`): SSE chunks leave as the engine samples; the turn commits at its end.

The wire format is OpenAI's `chat.completion.chunk` stream, so the openai SDK's stream helpers accumulate it
into the message of the non-streaming reply:
- a first chunk with `role: assistant`, sent before the engine's first ids;
- one chunk per engine chunk that decides something: its `reasoning_content`, `content` and `tool_calls`
  deltas (from `TitoTokenizer.incremental_parser`). Text that a later id could still turn into markup is held
  back. A tool call arrives whole: its `index`, `id` and `name`, then its arguments, once its closing markup
  arrives, because a call cut by length is not in the final message and the deltas must add up to it;
- the last choice chunk, with the rest of the message and `finish_reason`, sent once the turn is committed
  (the same record the non-streaming path writes), with `tito: {session_id, node_id, invalid_tool_calls}`;
- with `stream_options.include_usage`, a chunk with `choices: []` and `usage`; then `data: [DONE]`.
With `return_token_ids: true` in the body, every chunk that covers sampled ids carries them and their
logprobs next to `choices`: `"tito": {"token_ids": [...], "logprobs": [...]}`; over the stream they add up to
the committed turn's `output_ids` and `output_logprobs`.

An engine error, a session deleted mid-turn or `--engine-timeout` ends the stream with an `event: error` whose
data is OpenAI's `{"error": {"type", "message"}}` (the SDK raises it) and commits nothing; a client that
disconnects gets its engine request aborted (server.aborting) and commits nothing.

Imports from tito: engines.protocol, errors, parsing.incremental, server.aborting, server.completions, server.errors,
server.logprobs, server.models, server.state, trajectory.events.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import replace
from typing import Any

import orjson
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from tito.engines.protocol import FinishKind, GenerationChunk, StreamCollector
from tito.errors import EngineResponseError, TitoError
from tito.parsing.incremental import Delta
from tito.server.aborting import TurnWatch
from tito.server.completions import PreparedTurn, build_turn, engine_request, reply_body
from tito.server.errors import ClientDisconnectedError, SessionGoneError, error_body
from tito.server.logprobs import choice_logprobs
from tito.server.models import ChatCompletionRequest
from tito.server.state import ServerState
from tito.trajectory.events import TurnCommitted

DONE = b"data: [DONE]\n\n"


class SseResponse(Response):
    """Sends each event as it comes; the events' generator is closed when the client goes away."""

    def __init__(self, events: AsyncGenerator[bytes, None]) -> None:
        super().__init__(status_code=200)
        self.raw_headers = [  # no content-length: the body's length is not known when the headers leave
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no"),
        ]
        self.events = events

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        try:
            async with contextlib.aclosing(self.events) as events:
                async for event in events:
                    await send({"type": "http.response.body", "body": event, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            return  # the client went away mid-send; closing the events aborted the turn


class ChunkEncoder:
    """One turn's `chat.completion.chunk` events as SSE bytes; the constant head is encoded once."""

    def __init__(self, model: str, response_id: str | None = None, created: int | None = None) -> None:
        self.response_id = response_id or f"chatcmpl-{secrets.token_hex(12)}"
        head = {"id": self.response_id, "object": "chat.completion.chunk", "created": created or int(time.time())}
        self._head = b"data: " + orjson.dumps({**head, "model": model})[:-1]
        self._choice = self._head + b',"choices":[{"index":0,"logprobs":null,"delta":'

    def chunk(
        self,
        delta: dict[str, Any],
        finish_reason: str | None = None,
        tito: dict[str, Any] | None = None,
        logprobs: dict[str, Any] | None = None,
    ) -> bytes:
        end = b',"finish_reason":' + orjson.dumps(finish_reason) + b"}]"
        if tito is not None:
            end += b',"tito":' + orjson.dumps(tito)
        if logprobs is not None:
            choice = self._head + b',"choices":[{"index":0,"logprobs":' + orjson.dumps(logprobs) + b',"delta":'
            return choice + orjson.dumps(delta) + end + b"}\n\n"
        return self._choice + orjson.dumps(delta) + end + b"}\n\n"

    def usage(self, usage: dict[str, Any]) -> bytes:
        return self._head + b',"choices":[],"usage":' + orjson.dumps(usage) + b"}\n\n"


def error_event(body: dict[str, Any]) -> bytes:
    """An SSE error with an error body (OpenAI's shape): the openai SDK raises it as an APIError."""
    return b"event: error\ndata: " + orjson.dumps(body) + b"\n\n"


def delta_object(deltas: Sequence[Delta]) -> dict[str, Any]:
    """The deltas one engine chunk decided, as one OpenAI `delta` (a call's header and arguments in one entry)."""
    reasoning: list[str] = []
    content: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    for delta in deltas:
        if delta.tool_call is not None:
            entry = calls.get(delta.tool_call.index)
            if entry is None:
                calls[delta.tool_call.index] = delta.tool_call.as_openai()
            else:
                entry["function"]["arguments"] += delta.tool_call.arguments
        elif delta.reasoning_content is not None:
            reasoning.append(delta.reasoning_content)
        elif delta.content is not None:
            content.append(delta.content)
    merged: dict[str, Any] = {}
    if reasoning:
        merged["reasoning_content"] = "".join(reasoning)
    if content:
        merged["content"] = "".join(content)
    if calls:
        merged["tool_calls"] = list(calls.values())
    return merged


def streamed_reply(
    state: ServerState, chat: ChatCompletionRequest, prepared: PreparedTurn | TurnCommitted, receive: Receive
) -> SseResponse:
    """The SSE reply of a `stream: true` request: the turn streamed, or a committed turn (an SDK retry) again."""
    if isinstance(prepared, TurnCommitted):
        stored = choice_logprobs(chat, state.tokenizers.tokenizer, prepared.output_ids, prepared.output_logprobs)
        return SseResponse(replay_committed(prepared, state.model_name, _include_usage(chat), stored))
    return SseResponse(stream_turn(state, prepared, receive))


async def stream_turn(state: ServerState, prepared: PreparedTurn, receive: Receive) -> AsyncGenerator[bytes, None]:
    """The SSE events of one streamed turn, committing it when the engine finishes (see the module docstring)."""
    started = time.monotonic()
    request = prepared.request
    encoder = ChunkEncoder(state.model_name)
    with_ids = bool(request.return_token_ids)
    tokenizer = prepared.tito_tokenizer.tokenizer
    engine = state.engine
    parser = prepared.tito_tokenizer.incremental_parser(prepared.prompt_ids, request.tools)
    collector = StreamCollector(time.monotonic())
    yield encoder.chunk({"role": "assistant", "content": ""})
    try:
        watch = TurnWatch(engine, prepared.request_id, prepared.session, receive, state.options.engine_timeout)
        async with watch:
            try:
                async with _closing(engine.stream(engine_request(prepared))) as chunks:
                    async for chunk in chunks:
                        collector.add(chunk)
                        deltas = parser.feed(chunk.ids)
                        logprobs = choice_logprobs(request, tokenizer, chunk.ids, chunk.logprobs, chunk.top_logprobs)
                        if with_ids and chunk.ids:
                            ids = {"token_ids": chunk.ids.tolist(), "logprobs": chunk.logprobs.tolist()}
                            yield encoder.chunk(delta_object(deltas), tito=ids, logprobs=logprobs)
                        elif deltas or (logprobs is not None and chunk.ids):
                            yield encoder.chunk(delta_object(deltas), logprobs=logprobs)
            except TitoError:
                raise
            except Exception as exc:
                raise EngineResponseError(engine.info.name, f"the stream failed: {type(exc).__name__}: {exc}") from exc
            generation = collector.generation()
            if generation.finish.kind is FinishKind.ABORT:
                raise EngineResponseError(
                    engine.info.name, f"the engine aborted the generation: {generation.finish.detail}"
                )
        last_deltas, result = parser.finish()
        turn = replace(build_turn(prepared, generation, result, engine.info), response_id=encoder.response_id)
        committed = await state.registry.commit(prepared.session, prepared.plan, turn)
        if committed is None:
            raise SessionGoneError(f"session {turn.session_id} was deleted during the turn; the turn was not recorded")
        turn = committed
        state.metrics.observe_turn(
            len(prepared.prompt_ids), len(generation.output_ids), generation.timings.total, time.monotonic() - started
        )
    except ClientDisconnectedError:
        state.metrics.errors.labels(ClientDisconnectedError.__name__).inc()
        return
    except TitoError as exc:
        state.metrics.errors.labels(type(exc).__name__).inc()
        yield error_event(error_body(exc))
        return
    except Exception as exc:  # the headers are gone: an unexpected failure still ends the stream in OpenAI's shape
        state.metrics.errors.labels("InternalError").inc()
        yield error_event(
            {"error": {"type": "InternalError", "message": f"internal error: {type(exc).__name__}: {exc}"}}
        )
        return
    for event in _ending(encoder, turn, delta_object(last_deltas), state.model_name, _include_usage(request)):
        yield event


async def replay_committed(
    turn: TurnCommitted, model: str, include_usage: bool, logprobs: dict[str, Any] | None = None
) -> AsyncGenerator[bytes, None]:
    """An SDK retry of a streamed turn that already committed: the committed message (and its stored logprobs when
    asked), streamed again."""
    encoder = ChunkEncoder(model, turn.response_id, int(turn.at))
    yield encoder.chunk({"role": "assistant", "content": ""}, logprobs=logprobs)
    message = turn.assistant
    delta = {key: message[key] for key in ("reasoning_content", "content") if message.get(key)}
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": index, **call} for index, call in enumerate(message["tool_calls"])]
    for event in _ending(encoder, turn, delta, model, include_usage):
        yield event


def _ending(
    encoder: ChunkEncoder, turn: TurnCommitted, delta: dict[str, Any], model: str, include_usage: bool
) -> list[bytes]:
    body = reply_body(turn, model)
    events = [encoder.chunk(delta, turn.finish_reason, body["tito"])]
    if include_usage:
        events.append(encoder.usage(body["usage"]))
    events.append(DONE)
    return events


def _include_usage(request: ChatCompletionRequest) -> bool:
    options = request.stream_options
    return options is not None and options.include_usage


@contextlib.asynccontextmanager
async def _closing(chunks: AsyncIterator[GenerationChunk]) -> AsyncGenerator[AsyncIterator[GenerationChunk], None]:
    """Close the engine's stream when the turn leaves it early (an HTTP engine then drops its connection)."""
    try:
        yield chunks
    finally:
        if isinstance(chunks, AsyncGenerator):
            await chunks.aclose()
