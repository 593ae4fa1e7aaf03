"""One chat turn as reusable steps: prepare (validate, plan, prompt ids), generate, finish (parse, record, commit),
reply.

`finish_turn` is the one place a turn is finished: the whole-reply path (`complete_turn`) and the streaming one
(server.turns.streaming.stream_turn, which streams from the engine and collects the same `Generation`) both end in it,
in every dialect (server.dialects runs these same steps on the chat request it translates its own into), so a
parser failure, a session deleted mid-turn and the turn's timing behave the same on every path.

Imports from tito: engines.protocol, errors, messages, parsing, path_ids, tokenizer, trajectory.base,
trajectory.episode, trajectory.events, trajectory.linear, trajectory.shared_values, server.errors, server.models,
server.sessions, server.state, server.turns.
"""

from __future__ import annotations

import asyncio
import functools
import operator
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import orjson
from pydantic import ValidationError
from starlette.types import Receive

from tito.engines.protocol import EngineInfo, FinishKind, GenerateRequest, Generation, SamplingParams
from tito.errors import AppendOnlyError, EngineResponseError, EngineTimeoutError, TitoError
from tito.messages import check_tool_call_ids
from tito.parsing import ParseResult
from tito.path_ids import exact_ids
from tito.server.errors import BadRequestError, SessionGoneError, validation_error
from tito.server.models import ChatCompletionRequest, json_objects
from tito.server.sessions.lineage import asks_structured_output
from tito.server.sessions.registry import Session
from tito.server.sessions.resends import count_resend
from tito.server.sessions.resent_prefix import ReadBody, ResentPrefix
from tito.server.sessions.shared_tools import with_shared_tools
from tito.server.state import ServerState
from tito.server.turns.aborting import TurnWatch
from tito.server.turns.logprobs import requested_top_logprobs
from tito.tokenizer import TitoTokenizer
from tito.trajectory.base import TurnPlan
from tito.trajectory.episode import Episode, Lineage
from tito.trajectory.events import TurnCommitted
from tito.trajectory.linear import ToolsChangedError
from tito.trajectory.shared_values import SHARED


@dataclass(frozen=True)
class PreparedTurn:
    """A validated, planned turn with its prompt ids: everything the engine call needs."""

    session: Session
    request: ChatCompletionRequest
    tito_tokenizer: TitoTokenizer
    plan: TurnPlan
    prompt_ids: memoryview
    """int32, in a buffer later turns write over once it is dropped (`tito.prompt_buffers`)."""
    kept_parent_ids: int
    """How many of the parent path's ids the prompt keeps (the rest of the prompt is the turn's own)."""
    sampling: SamplingParams
    fingerprint: str
    request_id: str = field(default_factory=lambda: f"tito-{secrets.token_hex(8)}")
    """The engine request's id: what an abort names."""
    requested_at: float = field(default_factory=time.time)
    """Wall-clock time the turn was prepared (its request's arrival, less body reading): the sample's
    `request_timestamp`."""


def parse_chat_request(body: bytes) -> ChatCompletionRequest:
    try:
        request = ChatCompletionRequest.model_validate_json(body)
    except ValidationError as exc:
        raise validation_error(exc) from None
    if request.n is not None and request.n > 1:
        raise BadRequestError(f"n={request.n}: a session records one trajectory, so n must be 1")
    return request


RECENT_REPLIES = 4
"""How many of a session's last replies a resent body's new messages are looked up among (a sub-agent's turns
may come between a conversation's reply and its resend)."""


def read_chat_body(session: Session, body: bytes) -> ReadBody[ChatCompletionRequest]:
    """The chat request of a turn body and its digest, read from the session's previous chat body's prefix when it
    is one (server.sessions.resent_prefix: only the new messages parsed and validated)."""
    prefix = session.resent_bodies.get("chat")
    if prefix is None:
        prefix = session.resent_bodies["chat"] = chat_body_reader(session.trajectory)
    return prefix.read(body)


def chat_body_reader(episode: Episode | None = None) -> ResentPrefix[ChatCompletionRequest]:
    """Chat bodies read from the previous one's prefix: `messages` is the conversation array. What the reader
    keeps holds the process's shared tools, and `episode`'s stored replies where a body resends them as they are
    (issue 34: a session's reader keeps no second copy of either)."""
    hold = (lambda messages: None) if episode is None else functools.partial(hold_stored_replies, episode)
    return ResentPrefix("messages", _parse_shared_tools, json_objects, _messages_of, _with_messages, hold)


def _parse_shared_tools(body: bytes) -> ChatCompletionRequest:
    return with_shared_tools(parse_chat_request(body))


def hold_stored_replies(episode: Episode, messages: list[Any]) -> None:
    """Replaces, in place, each assistant message that is one of the episode's last RECENT_REPLIES stored replies
    as it is (equal as JSON too: `1` is not `1.0`) by the stored object."""
    replies: list[Any] | None = None
    for index, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        if replies is None:
            replies = episode.recent_replies(RECENT_REPLIES)
        for reply in replies:
            if reply == message and orjson.dumps(reply) == orjson.dumps(message):
                messages[index] = reply
                break


def _messages_of(request: ChatCompletionRequest) -> list[Any]:
    return request.messages


def _with_messages(request: ChatCompletionRequest, messages: list[Any]) -> ChatCompletionRequest:
    return request.model_copy(update={"messages": messages})


@dataclass(frozen=True)
class TurnPrompt:
    """What a turn's request would run on: the session's tokenizer, the plan and the prompt ids."""

    tito_tokenizer: TitoTokenizer
    plan: TurnPlan
    prompt_ids: memoryview
    """int32, in a buffer later turns write over once it is dropped (`tito.prompt_buffers`)."""
    kept_parent_ids: int


async def plan_prompt(
    state: ServerState,
    session: Session,
    request: ChatCompletionRequest,
    body_fingerprint: str,
    is_retry: bool,
    lineage: Lineage | None = None,
) -> TurnPrompt | TurnCommitted:
    """Plan the turn (in the conversation of the episode it belongs to: `lineage`, from the request's headers, else
    its messages) and build its prompt ids; mutates and counts nothing (count_tokens asks only this). A committed
    turn when the request is an SDK retry of it."""
    tito_tokenizer = state.tokenizers.get(
        session.config.chat_template_kwargs, request.chat_template_kwargs, session.config.allowed_append_roles
    )
    structured = asks_structured_output(request.model_extra)
    plan = session.trajectory.plan(request.messages, request.tools, body_fingerprint, is_retry, lineage, structured)
    if plan.idempotent_reply is not None:
        return plan.idempotent_reply
    check_tool_call_ids(plan.new_messages, len(plan.new_messages) - len(plan.appended))
    appended_chars = sum(len(str(message.get("content") or "")) for message in plan.appended)
    if appended_chars > state.options.offload_chars:
        prompt_ids, kept = await asyncio.to_thread(build_prompt_ids, tito_tokenizer, plan, request.tools)
    else:
        prompt_ids, kept = build_prompt_ids(tito_tokenizer, plan, request.tools)
    return TurnPrompt(tito_tokenizer, plan, prompt_ids, kept)


async def prepare_turn(
    state: ServerState,
    session: Session,
    request: ChatCompletionRequest,
    body_fingerprint: str,
    is_retry: bool,
    lineage: Lineage | None = None,
) -> PreparedTurn | TurnCommitted:
    """Validate and plan the turn and build its prompt ids, counting how the resend matched; mutates nothing. A
    committed turn when the request is an SDK retry of it (reply with that instead of sampling again)."""
    try:
        prompt = await plan_prompt(state, session, request, body_fingerprint, is_retry, lineage)
    except (AppendOnlyError, ToolsChangedError):  # every refused resend is counted
        count_resend(session.resends, state.metrics, None)
        raise
    if isinstance(prompt, TurnCommitted):
        return prompt
    count_resend(session.resends, state.metrics, prompt.plan)
    sampling = sampling_params(state, prompt.tito_tokenizer, request, len(prompt.prompt_ids))
    return PreparedTurn(
        session,
        request,
        prompt.tito_tokenizer,
        prompt.plan,
        prompt.prompt_ids,
        prompt.kept_parent_ids,
        sampling,
        body_fingerprint,
    )


def build_prompt_ids(
    tito_tokenizer: TitoTokenizer, plan: TurnPlan, tools: Sequence[Mapping[str, Any]] | None
) -> tuple[memoryview, int]:
    """The turn's prompt ids (stored ids + junction + appended ids + generation prompt) and how many stored ids
    it keeps. The role gate and the append-only check run inside merge_tokens."""
    prompt_ids = tito_tokenizer.merge_recorded_tokens(plan.stored_messages, plan.new_messages, plan.stored_ids, tools)
    if not plan.stored_messages:
        return prompt_ids, 0
    return prompt_ids, tito_tokenizer.kept_stored_ids(plan.stored_ids)


def sampling_params(
    state: ServerState, tito_tokenizer: TitoTokenizer, request: ChatCompletionRequest, prompt_length: int
) -> SamplingParams:
    """The request's sampling parameters for the engine; stop tokens are the family's."""
    max_context = state.engine.info.max_context
    if max_context is not None and prompt_length >= max_context:
        raise BadRequestError(
            f"the prompt is {prompt_length} tokens, but the engine's context is {max_context}: nothing can be generated"
        )
    limit = request.max_completion_tokens or request.max_tokens
    if limit is None:
        limit = max_context - prompt_length if max_context is not None else state.options.default_max_tokens
    stop = (request.stop,) if isinstance(request.stop, str) else tuple(request.stop or ())
    return SamplingParams(
        max_new_tokens=limit,
        temperature=1.0 if request.temperature is None else request.temperature,
        top_p=1.0 if request.top_p is None else request.top_p,
        top_k=request.top_k,
        min_p=request.min_p or 0.0,
        stop_token_ids=tito_tokenizer.stop_token_ids,
        stop=stop,
        seed=request.seed,
        presence_penalty=request.presence_penalty or 0.0,
        frequency_penalty=request.frequency_penalty or 0.0,
        repetition_penalty=1.0 if request.repetition_penalty is None else request.repetition_penalty,
        top_logprobs=requested_top_logprobs(request, state.engine.info),
        json_schema=response_schema(request.response_format, state.engine.info),
    )


def response_schema(response_format: Any, engine: EngineInfo) -> str | None:
    """The JSON schema a `response_format` (every dialect's structured output, translated) constrains decoding to, as
    JSON text; None for plain text. An engine that cannot constrain decoding refuses it: never silence."""
    if response_format is None:
        return None
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        schema: Any = {"type": "object"}
    elif kind == "json_schema":
        spec = response_format.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        if not isinstance(schema, dict):
            raise BadRequestError("response_format.json_schema.schema: required, a JSON schema object")
    else:
        raise BadRequestError(f"response_format.type: must be text, json_object or json_schema, not {kind!r}")
    if not engine.structured_output:
        raise BadRequestError(
            f"structured output ({kind}) needs constrained decoding, which the {engine.name} engine does not do "
            "(tito serve --engine sglang or vllm do)"
        )
    return orjson.dumps(schema).decode()


def engine_request(prepared: PreparedTurn) -> GenerateRequest:
    return GenerateRequest(prepared.prompt_ids, prepared.sampling, prepared.request_id, prepared.session.session_id)


async def generate(state: ServerState, prepared: PreparedTurn) -> Generation:
    """The engine call, no lock held; every failure becomes an EngineError (502/504) and changes nothing."""
    engine = state.engine
    request = engine_request(prepared)
    try:
        async with asyncio.timeout(state.options.engine_timeout):  # no task of its own, as wait_for makes
            generation = await engine.generate(request)
    except TimeoutError:
        await engine.abort(request.request_id)
        raise EngineTimeoutError(
            engine.info.name, f"no reply within {state.options.engine_timeout:g}s (tito serve --engine-timeout)"
        ) from None
    except TitoError:
        raise
    except Exception as exc:
        raise EngineResponseError(engine.info.name, f"the engine client failed: {type(exc).__name__}: {exc}") from exc
    if generation.finish.kind is FinishKind.ABORT:
        raise EngineResponseError(engine.info.name, f"the engine aborted the generation: {generation.finish.detail}")
    return generation


@dataclass(frozen=True)
class CompletedTurn:
    """A whole-reply turn once committed: the recorded turn and the engine's generation (its top logprobs)."""

    turn: TurnCommitted
    generation: Generation


async def complete_turn(
    state: ServerState,
    prepared: PreparedTurn,
    receive: Receive,
    started: float,
    label: TurnLabel | None = None,
) -> CompletedTurn:
    """The whole-reply turn: generate (aborted if the client goes away), then `finish_turn`. `label` is what a
    dialect records of itself (its response id, `metadata["dialect"]`); `started` is when the request arrived."""
    engine_started = time.monotonic()
    async with TurnWatch(state.engine, prepared.request_id, prepared.session, receive):
        generation = await generate(state, prepared)
    engine_seconds = time.monotonic() - engine_started
    parser = prepared.tito_tokenizer
    turn = await finish_turn(
        state,
        prepared,
        generation,
        lambda: parser.parse_built_completion(generation.output_ids, prepared.prompt_ids, prepared.request.tools),
        TurnTiming(started, engine_seconds),
        label,
    )
    return CompletedTurn(turn, generation)


@dataclass(frozen=True)
class TurnTiming:
    """A turn's clock, measured the same way whole or streamed (monotonic seconds)."""

    started: float
    """When the request arrived (before its body was read)."""
    engine_seconds: float
    """The engine call's wall time on tito's clock: from the request leaving to the last id; a stream's, the sum of
    the waits for its chunks (tito's work on each chunk is not the engine's)."""


@dataclass(frozen=True, slots=True)
class TurnLabel:
    """What a dialect records its turn with (`finish_turn` builds the turn with it, not a copy of it after): the
    response id its replies name, and metadata beside the turn's own (`dialect`, what the edge recorded of the
    request). Chat completions' whole replies have none: a `chatcmpl-` id, no `dialect`."""

    response_id: str
    metadata: Mapping[str, Any] = field(default_factory=dict)


async def finish_turn(
    state: ServerState,
    prepared: PreparedTurn,
    generation: Generation,
    parse: Callable[[], ParseResult],
    timing: TurnTiming,
    label: TurnLabel | None = None,
) -> TurnCommitted:
    """The one place a turn is finished, whole or streamed, in every dialect: parse the sampled ids, build the
    turn's event with the dialect's label, commit it, count it. Returns the turn as committed.

    One behaviour for every path: a parser that raises is a 502 naming the parser (`parse_failure`: the sampled
    ids could not become a reply; nothing is recorded and a retry samples anew); a session deleted between the
    engine's end and the commit is a 410 (SessionGoneError), never a reply naming a node that was not recorded."""
    try:
        result = parse()
    except TitoError:
        raise
    except Exception as exc:
        raise parse_failure(exc) from exc
    turn = build_turn(prepared, generation, result, state.engine.info, label)
    committed = await state.registry.commit(prepared.session, prepared.plan, turn)
    if committed is None:
        raise SessionGoneError(f"session {turn.session_id} was deleted during the turn; the turn was not recorded")
    state.metrics.observe_turn(
        len(prepared.prompt_ids), len(generation.output_ids), timing.engine_seconds, time.monotonic() - timing.started
    )
    return committed


def parse_failure(exc: Exception) -> EngineResponseError:
    """A parser exception on sampled ids (whole or incremental): a 502 that names the parser."""
    return EngineResponseError("parser", f"the sampled ids could not be parsed: {type(exc).__name__}: {exc}")


def _invalid_calls(result: ParseResult) -> list[dict[str, Any]]:
    """The tool-call attempts that did not parse (the library names them `failed_calls`)."""
    return [
        {"index": call.index, "status": call.status.value, "name": call.name, "detail": call.detail, "raw": call.raw}
        for call in result.failed_calls
    ]


_SAMPLING_FIELDS = tuple(f.name for f in fields(SamplingParams))
"""What a turn records of its sampling, in field order: read once, not by `dataclasses.fields` on every turn."""
_sampling_values = operator.attrgetter(*_SAMPLING_FIELDS)
"""A `SamplingParams`' values in that order, read in one C call."""


def build_turn(
    prepared: PreparedTurn,
    generation: Generation,
    result: ParseResult,
    engine: EngineInfo,
    label: TurnLabel | None = None,
) -> TurnCommitted:
    """The event that records the turn: prompt ids beyond the kept parent ids, sampled ids and logprobs, facts, and
    the dialect's `label` (without one, a `chatcmpl-` id)."""
    finish_reason = "length" if generation.finish.kind is FinishKind.LENGTH else result.finish_reason
    plan = prepared.plan
    sampling = prepared.sampling
    metadata = {
        "prompt_tokens": len(prepared.prompt_ids),
        "completion_tokens": len(generation.output_ids),
        "cached_tokens": generation.cached_tokens,
        "engine": engine.name,
        "logprob_semantics": engine.logprob_semantics.value,
        "engine_finish": generation.finish.kind.value,
        "weight_versions": list(generation.weight_versions),
        "timings": {"engine": generation.timings.total, "first_token": generation.timings.first_token},
        "sampling": {
            name: list(value) if isinstance(value, tuple) else value  # as JSON reads them back
            for name, value in zip(_SAMPLING_FIELDS, _sampling_values(sampling), strict=True)
        },
        "chat_template_kwargs": dict(prepared.tito_tokenizer.template_kwargs),
        "invalid_tool_calls": _invalid_calls(result),
        "requested_at": prepared.requested_at,
    }
    if generation.finish.matched_text is not None:
        metadata["stop_string"] = generation.finish.matched_text  # Anthropic's stop_reason `stop_sequence` names it
    if label is not None:
        metadata.update(label.metadata)
    return TurnCommitted(
        session_id=prepared.session.session_id,
        node_id=prepared.session.trajectory.store.next_node_id,
        parent_id=plan.parent_id,
        kept_parent_ids=prepared.kept_parent_ids,
        request_messages=tuple(plan.appended),
        tools=None if prepared.request.tools is None else SHARED.held_tuple(prepared.request.tools),
        prompt_ids=exact_ids(prepared.prompt_ids[prepared.kept_parent_ids :]),  # a copy: the buffer is reused
        output_ids=generation.output_ids,
        output_logprobs=generation.output_logprobs,
        assistant=result.message,
        finish_reason=finish_reason,
        response_id=f"chatcmpl-{secrets.token_hex(12)}" if label is None else label.response_id,
        request_fingerprint=prepared.fingerprint,
        metadata=metadata,
        at=time.time(),
    )


def reply_body(turn: TurnCommitted, model: str, logprobs: dict[str, Any] | None = None) -> dict[str, Any]:
    """The OpenAI chat.completion object of a committed turn (also what an SDK retry gets back); `logprobs` is
    its `choices[0].logprobs` when the request asked for them (server.turns.logprobs)."""
    prompt_tokens = int(turn.metadata.get("prompt_tokens", 0))
    completion_tokens = len(turn.output_ids)
    return {
        "id": turn.response_id,
        "object": "chat.completion",
        "created": int(turn.at),
        "model": model,
        "choices": [{"index": 0, "message": turn.assistant, "finish_reason": turn.finish_reason, "logprobs": logprobs}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": int(turn.metadata.get("cached_tokens", 0))},
        },
        "tito": {
            "session_id": turn.session_id,
            "node_id": turn.node_id,
            "invalid_tool_calls": len(turn.metadata.get("invalid_tool_calls", ())),
        },
    }
