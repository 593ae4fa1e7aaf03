"""Streamed chat turns (`stream: true`): SSE chunks leave as the engine samples; the turn commits at its end.

The wire format is OpenAI's `chat.completion.chunk` stream, so the openai SDK's stream helpers accumulate it
into the message of the non-streaming reply:
- a first chunk with `role: assistant`, sent with the engine's first events (in the same send as what follows it,
  the headers' send right before: one wake-up of the client for all three, `SseResponse`);
- one chunk per engine chunk that decides something: its `reasoning_content`, `content` and `tool_calls`
  deltas (from `TitoTokenizer.incremental_parser`; `content` and `reasoning_content` in every delta, null when
  it has none, as SGLang and vLLM send them). Text that a later id could still turn into markup is held back.
  A tool call arrives whole: its `index`, `id` and `name`, then its arguments, once its closing markup arrives,
  because a call cut by length is not in the final message and the deltas must add up to it;
- the last choice chunk, with the rest of the message and `finish_reason`, sent once the turn is committed
  (the same record the non-streaming path writes), with `tito: {session_id, node_id, invalid_tool_calls}`;
- with `stream_options.include_usage`, a chunk with `choices: []` and `usage`; then `data: [DONE]`.
With `return_token_ids: true` in the body, every chunk that covers sampled ids carries them and their
logprobs next to `choices`: `"tito": {"token_ids": [...], "logprobs": [...]}`; over the stream they add up to
the committed turn's `output_ids` and `output_logprobs`.

An engine error, a session deleted mid-turn or `--engine-timeout` ends the stream with an `event: error` whose
data is OpenAI's `{"error": {"type", "message"}}` (the SDK raises it) and commits nothing; a client that
disconnects gets its engine request aborted (server.turns.aborting) and commits nothing.

The core (`stream_turn`) knows no wire format: engine stream -> collector -> incremental parser deltas, abort watch
and errors, then `finish_turn` (server.turns.completions, the whole-reply path's too) parses, records and commits. A
`StreamEncoder` turns its deltas, the committed turn and a failure into one dialect's events; `ChatStreamEncoder`
is chat completions' (server.dialects holds the others).

Imports from tito: engines.protocol, errors, parsing, parsing.incremental, server.turns.aborting,
server.turns.completions, server.errors, server.turns.logprobs, server.models, server.state, tokenizer_protocol,
trajectory.events.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any, Protocol

import orjson
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from tito.engines.protocol import FinishKind, GenerationChunk, StreamCollector
from tito.errors import EngineResponseError, TitoError
from tito.parsing import ParseResult
from tito.parsing.incremental import Delta, IncrementalParser, ToolCallDelta
from tito.server.errors import ClientDisconnectedError, openai_error
from tito.server.models import ChatCompletionRequest
from tito.server.state import ServerState
from tito.server.turns.aborting import TurnWatch
from tito.server.turns.completions import (
    PreparedTurn,
    TurnLabel,
    TurnTiming,
    engine_request,
    finish_turn,
    parse_failure,
    reply_body,
)
from tito.server.turns.logprobs import choice_logprobs
from tito.tokenizer_protocol import Tokenizer
from tito.trajectory.events import TurnCommitted

DONE = b"data: [DONE]\n\n"
OPENING_DELTA = {"role": "assistant", "content": "", "reasoning_content": None}
"""Every delta carries `content` and `reasoning_content` (null when it has none), as SGLang's and vLLM's do: the
openai SDK's delta type has no `reasoning_content` field, so `delta.reasoning_content` raises AttributeError on a
chunk that lacks the key."""


class LastEvent:
    """A stream's last events: `SseResponse` sends them with the body's end, in one send."""

    __slots__ = ("body",)

    def __init__(self, body: bytes) -> None:
        self.body = body


class SseResponse(Response):
    """Sends each event as it comes, one ASGI send each (a `LastEvent` ends the body in the same send); the events'
    generator is closed when the client goes away. The headers leave with the first events, right before them, not
    when the engine is asked: a client waits for the events anyway, and is woken once for both rather than once
    more while the engine computes (a socket write and a wake-up of the client fewer per streamed turn)."""

    def __init__(self, events: AsyncGenerator[bytes | LastEvent, None]) -> None:
        super().__init__(status_code=200)
        self.raw_headers = [  # no content-length: the body's length is not known when the headers leave
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no"),
        ]
        self.events = events

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False
        try:
            async with contextlib.aclosing(self.events) as events:
                async for event in events:
                    if not started:
                        await self._start(send)
                        started = True
                    if type(event) is LastEvent:
                        await send({"type": "http.response.body", "body": event.body, "more_body": False})
                        return
                    await send({"type": "http.response.body", "body": event, "more_body": True})
            if not started:
                await self._start(send)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            return  # the client went away mid-send; closing the events aborted the turn

    async def _start(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})


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


class StreamEncoder(Protocol):
    """One dialect's events of one streamed turn, as SSE bytes; the core calls it in this order: `opening` once,
    `chunk` per engine chunk, then `closing` once the turn is committed, or `failure` instead."""

    label: TurnLabel
    """What the dialect records its turn with: its response id (chat: `chatcmpl-...`), its metadata."""

    def opening(self) -> list[bytes]:
        """The events that open the stream, in pieces joined once with the engine's first events (one send, one copy:
        a Responses opening repeats the request's instructions and tools, hundreds of kilobytes for an agent)."""
        ...

    def chunk(self, deltas: Sequence[Delta], chunk: GenerationChunk) -> bytes:
        """The events of one engine chunk and the deltas it decided (b"" for none)."""
        ...

    def closing(self, deltas: Sequence[Delta], turn: TurnCommitted) -> list[bytes]:
        """The last deltas (what only the whole parse decides) and the events that end the committed turn, in pieces
        joined once with what else leaves in the last send."""
        ...

    def failure(self, exc: Exception) -> bytes:
        """The error event that ends a stream whose turn committed nothing (a TitoError or an unexpected one)."""
        ...


class ChatStreamEncoder:
    """Chat completions' `StreamEncoder`: `chat.completion.chunk` events (see the module docstring). With `turn`,
    an SDK retry's replay: the committed turn's id and time, its stored logprobs on the role chunk when asked."""

    def __init__(
        self, model: str, request: ChatCompletionRequest, tokenizer: Tokenizer, turn: TurnCommitted | None = None
    ) -> None:
        self.model = model
        self.request = request
        self.tokenizer = tokenizer
        self.include_usage = _include_usage(request)
        self.with_ids = bool(request.return_token_ids)
        if turn is None:
            self.chunks = ChunkEncoder(model)
            self.opening_logprobs = None
        else:
            self.chunks = ChunkEncoder(model, turn.response_id, int(turn.at))
            self.opening_logprobs = choice_logprobs(request, tokenizer, turn.output_ids, turn.output_logprobs)
        self.label = TurnLabel(self.chunks.response_id)

    def opening(self) -> list[bytes]:
        return [self.chunks.chunk(OPENING_DELTA, logprobs=self.opening_logprobs)]

    def chunk(self, deltas: Sequence[Delta], chunk: GenerationChunk) -> bytes:
        logprobs = choice_logprobs(self.request, self.tokenizer, chunk.ids, chunk.logprobs, chunk.top_logprobs)
        if self.with_ids and chunk.ids:
            ids = {"token_ids": chunk.ids.tolist(), "logprobs": chunk.logprobs.tolist()}
            return self.chunks.chunk(delta_object(deltas), tito=ids, logprobs=logprobs)
        if deltas or (logprobs is not None and chunk.ids):
            return self.chunks.chunk(delta_object(deltas), logprobs=logprobs)
        return b""

    def closing(self, deltas: Sequence[Delta], turn: TurnCommitted) -> list[bytes]:
        body = reply_body(turn, self.model)
        events = [self.chunks.chunk(delta_object(deltas), turn.finish_reason, body["tito"])]
        if self.include_usage:
            events.append(self.chunks.usage(body["usage"]))
        events.append(DONE)
        return events

    def failure(self, exc: Exception) -> bytes:
        return error_event(openai_error(exc)[0])


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
    merged: dict[str, Any] = {  # both keys always (null: nothing this chunk): SDK users read delta.reasoning_content
        "content": "".join(content) if content else None,
        "reasoning_content": "".join(reasoning) if reasoning else None,
    }
    if calls:
        merged["tool_calls"] = list(calls.values())
    return merged


def message_deltas(message: Mapping[str, Any]) -> list[Delta]:
    """A committed assistant message as the deltas that add up to it (an SDK retry streams it again)."""
    deltas = [Delta(**{key: message[key]}) for key in ("reasoning_content", "content") if message.get(key)]
    for index, call in enumerate(message.get("tool_calls") or ()):
        function = call["function"]
        deltas.append(Delta(tool_call=ToolCallDelta(index, call["id"], function["name"], function["arguments"])))
    return deltas


def streamed_reply(
    state: ServerState,
    chat: ChatCompletionRequest,
    prepared: PreparedTurn | TurnCommitted,
    receive: Receive,
    started: float,
) -> SseResponse:
    """The SSE reply of a `stream: true` request: the turn streamed, or a committed turn (an SDK retry) again."""
    if isinstance(prepared, TurnCommitted):
        encoder = ChatStreamEncoder(state.reply_model(chat.model), chat, state.tokenizers.tokenizer, prepared)
        return SseResponse(replay_committed(prepared, encoder))
    return SseResponse(stream_turn(state, prepared, receive, started))


async def stream_turn(
    state: ServerState, prepared: PreparedTurn, receive: Receive, started: float, encoder: StreamEncoder | None = None
) -> AsyncGenerator[bytes | LastEvent, None]:
    """The SSE events of one streamed turn, finished by `finish_turn` when the engine ends (see the module
    docstring); `encoder` writes the dialect's events (default: chat completions'); `started` is when the request
    arrived."""
    request = prepared.request
    if encoder is None:
        encoder = ChatStreamEncoder(state.reply_model(request.model), request, prepared.tito_tokenizer.tokenizer)
    engine = state.engine
    parser = prepared.tito_tokenizer.incremental_parser(prepared.prompt_ids, request.tools)
    opening = encoder.opening()  # leaves with the first events that follow it, in one send
    try:
        collector = StreamCollector(time.monotonic())
        engine_seconds = 0.0  # the waits for the engine's chunks, not tito's work on them
        held: list[bytes] = []
        watch = TurnWatch(engine, prepared.request_id, prepared.session, receive, state.options.engine_timeout)
        async with watch:
            chunks = engine.stream(engine_request(prepared))
            next_chunk = chunks.__anext__
            try:
                while True:
                    waited = time.monotonic()
                    try:
                        chunk = await next_chunk()
                    except StopAsyncIteration:
                        break
                    finally:
                        engine_seconds += time.monotonic() - waited
                    collector.add(chunk)
                    last = chunk.finish is not None
                    event = encoder.chunk(_fed(parser, chunk.ids, last), chunk)
                    if last:
                        held.append(event)  # leaves with the closing events, in one send
                    elif event:
                        yield b"".join((*opening, event)) if opening else event
                        opening = []
            except TitoError:
                raise
            except Exception as exc:
                raise EngineResponseError(engine.info.name, f"the stream failed: {type(exc).__name__}: {exc}") from exc
            finally:  # a turn left early closes the engine's stream (an HTTP engine then drops its connection)
                if isinstance(chunks, AsyncGenerator):
                    await chunks.aclose()
            generation = collector.generation()
            if generation.finish.kind is FinishKind.ABORT:
                raise EngineResponseError(
                    engine.info.name, f"the engine aborted the generation: {generation.finish.detail}"
                )
        timing = TurnTiming(started, engine_seconds)
        last_deltas: list[Delta] = []

        def parse() -> ParseResult:
            deltas, result = parser.finish()
            last_deltas.extend(deltas)
            return result

        turn = await finish_turn(state, prepared, generation, parse, timing, encoder.label)
    except ClientDisconnectedError:
        state.metrics.errors.labels(ClientDisconnectedError.__name__).inc()
        return
    except TitoError as exc:
        state.metrics.count_error(exc)
        yield LastEvent(b"".join((*opening, encoder.failure(exc))))
        return
    except Exception as exc:  # the headers are gone: an unexpected failure still ends the stream in the dialect's shape
        state.metrics.errors.labels("InternalError").inc()
        yield LastEvent(b"".join((*opening, encoder.failure(exc))))
        return
    yield LastEvent(b"".join((*opening, *held, *encoder.closing(last_deltas, turn))))


def _fed(parser: IncrementalParser, ids: Sequence[int], last: bool) -> list[Delta]:
    """The deltas a chunk decides (`last`: the chunk with the finish, whose deltas `finish()` decides); a parser
    exception is the parser's failure (502), not the engine stream's."""
    try:
        return parser.feed(ids, last=last)
    except TitoError:
        raise
    except Exception as exc:
        raise parse_failure(exc) from exc


async def replay_committed(turn: TurnCommitted, encoder: StreamEncoder) -> AsyncGenerator[bytes | LastEvent, None]:
    """An SDK retry of a streamed turn that already committed: the committed message, streamed again."""
    yield b"".join(encoder.opening())
    yield LastEvent(b"".join(encoder.closing(message_deltas(turn.assistant), turn)))


def _include_usage(request: ChatCompletionRequest) -> bool:
    options = request.stream_options
    return options is not None and options.include_usage
