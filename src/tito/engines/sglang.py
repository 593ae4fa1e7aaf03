"""`sglang`: SGLang's native `POST /generate` with prompt ids, as documented in research/engines.md section 1.

Request: `input_ids`, `sampling_params` (stop token ids, `skip_special_tokens: false`), `return_logprob` for the
output tokens only (`logprob_start_len: -1`), `rid` = the request id, and the session id as routing key (body
`routing_key` and header `X-SMG-Routing-Key`, so the SGLang Model Gateway's consistent-hash or manual policy keeps a
session on one worker and its radix cache; header `X-Session-ID` for vllm-router's `consistent_hash` and
`sticky_least_loaded`, which also route SGLang's `/generate`). Reply: `output_ids` (the matched stop token kept) and
`meta_info.output_token_logprobs` triples `[logprob, id, text|null]`, `finish_reason` `{"type": "stop"|"length"|
"abort", ...}`, `prompt_tokens`, `cached_tokens`, `weight_version`. Streaming is SSE, cumulative by default
(`--incremental-streaming-output` sends deltas); both are read. Run SGLang with that flag for long replies: a
cumulative stream resends every id and logprob so far in each event, O(n^2) bytes over a reply.
A json schema (structured output) goes as `sampling_params.json_schema` (SGLang's own constrained decoding).
Logprobs are log softmax(logits / T): after temperature. `top_logprobs_num: k` (when the turn asks for top logprobs)
adds `meta_info.output_top_logprobs`, per sampled position a list of `[logprob, id, text|null]`.
Abort: `POST /abort_request {"rid"}`; SGLang aborts every rid that *starts with* it and ends the request with finish
`abort` and the ids so far.

Imports nothing from tito but engines.protocol, engines.http, engines.id_json and errors.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

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
from tito.errors import EngineRequestError, EngineResponseError

ENGINE = "sglang"
ROUTING_HEADER = "X-SMG-Routing-Key"
MAX_TOP_LOGPROBS = 20
"""The most top logprobs tito asks SGLang for per position (OpenAI's own bound)."""


class SGLangEngine:
    """An SGLang server (or an SGLang Model Gateway in front of several) over its native `/generate`."""

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 600.0,
        model: str = "",
        max_context: int | None = None,
        stream_interval: float = 0.0,
        stream_ids: int = 1,
    ) -> None:
        """`stream_interval`: a stream's events read at most once per this many seconds (`HttpEngineClient`).
        `stream_ids`: a streamed request asks SGLang for an event per this many ids (`sampling_params.stream_interval`:
        the first id and the finish still at once), so a reply of N ids wakes tito ~N/stream_ids times, not N."""
        self._http = HttpEngineClient(ENGINE, url, timeout=timeout, stream_interval=stream_interval)
        self._stream_ids = stream_ids
        self._prompts = PromptJson()
        """Each session's latest prompts as JSON: a turn's body extends its previous prompt's ids."""
        self._info = EngineInfo(
            ENGINE, model, max_context, LogprobSemantics.AFTER_TEMPERATURE, MAX_TOP_LOGPROBS, structured_output=True
        )

    @property
    def info(self) -> EngineInfo:
        return self._info

    async def generate(self, request: GenerateRequest) -> Generation:
        started = time.monotonic()
        reply = await self._http.post_json(
            "/generate", generate_body(request, stream=False, prompts=self._prompts), _headers(request)
        )
        chunk = parse_reply(reply, already_received=0)
        if chunk.finish is None:
            raise EngineResponseError(ENGINE, "/generate: a non-streaming reply without finish_reason")
        return Generation(
            output_ids=chunk.ids,
            output_logprobs=chunk.logprobs,
            finish=chunk.finish,
            prompt_tokens=chunk.prompt_tokens or 0,
            cached_tokens=chunk.cached_tokens or 0,
            weight_versions=(chunk.weight_version,) if chunk.weight_version else (),
            timings=Timings(total=time.monotonic() - started),
            top_logprobs=chunk.top_logprobs,
        )

    async def stream(self, request: GenerateRequest) -> AsyncIterator[GenerationChunk]:
        """One chunk per read of the SSE stream (all the events the engine wrote at once), two where the weight
        version changes within it."""
        received = 0
        finished = False
        body = generate_body(request, stream=True, prompts=self._prompts, stream_ids=self._stream_ids)
        bursts = self._http.post_sse("/generate", body, _headers(request))
        try:
            async for events in bursts:
                if finished:
                    continue  # read on to `[DONE]` so the connection goes back to the pool
                for chunk in parse_events(events, already_received=received):
                    received += len(chunk.ids)
                    finished = chunk.finish is not None
                    yield chunk
        finally:
            await bursts.aclose()
        if not finished:
            detail = f"/generate stream ended after {received} ids without a finish_reason"
            raise EngineResponseError(ENGINE, detail, fault="cut")

    async def health(self) -> None:
        """`GET /health`; the first time, also learn the served model from `GET /get_model_info` when not given."""
        await self._http.get("/health")
        if not self._info.model:
            model_info = self._http.decode("/get_model_info", (await self._http.get("/get_model_info")).content)
            model = require(ENGINE, model_info, "model_path", "/get_model_info")
            self._info = replace(self._info, model=str(model))

    async def abort(self, request_id: str) -> None:
        """Abort by rid (SGLang matches rids by prefix: an id that prefixes others aborts those too)."""
        await self._http.post_json("/abort_request", {"rid": request_id, "abort_all": False})

    async def release_session(self, session_id: str) -> bool:
        """End the session at a router in front (vllm-router's `/finish_session`); False when there is none. Its
        prompts' JSON is dropped either way."""
        self._prompts.forget(session_id)
        return await self._http.release_session(session_id)

    async def aclose(self) -> None:
        await self._http.aclose()


def generate_body(
    request: GenerateRequest, *, stream: bool, prompts: PromptJson | None = None, stream_ids: int = 1
) -> JsonObject:
    """`/generate`'s body; `prompts` writes the ids as an extension of the session's previous prompt; a stream asks
    for an event per `stream_ids` ids (SGLang's per-request `stream_interval`; 1: SGLang's own default)."""
    params = sampling_params(request.sampling)
    if stream and stream_ids > 1:
        params["stream_interval"] = stream_ids
    body: JsonObject = {
        "input_ids": prompt_json(request.prompt_ids, request.session_id, prompts),
        "sampling_params": params,
        "return_logprob": True,
        "logprob_start_len": -1,
        "top_logprobs_num": request.sampling.top_logprobs,
        "return_text_in_logprobs": False,
        "rid": request.request_id,
        "stream": stream,
    }
    if request.session_id is not None:
        body["routing_key"] = request.session_id
    return body


def sampling_params(sampling: SamplingParams) -> JsonObject:
    params: JsonObject = {
        "max_new_tokens": sampling.max_new_tokens,
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
        params["stop"] = list(sampling.stop)
    if sampling.seed is not None:
        params["sampling_seed"] = sampling.seed
    if sampling.json_schema is not None:
        params["json_schema"] = sampling.json_schema
    return params


def parse_reply(reply: Any, *, already_received: int) -> GenerationChunk:
    """The new ids and logprobs of one `/generate` reply (see `parse_events`)."""
    burst = _Burst(already_received)
    burst.add(reply)
    return burst.chunk()


def parse_events(events: list[Any], *, already_received: int) -> list[GenerationChunk]:
    """The SSE events of one read as one chunk: their new ids, logprobs and top logprobs concatenated, the finish,
    counts and weight version the events say (the last that says); a chunk more where the weight version changes
    (each chunk has one), and nothing after the first finish.

    Cumulative events (SGLang's default) repeat every id so far; incremental ones carry only the new ids. Either
    way `meta_info.completion_tokens` counts all ids so far, so an event's new ids are the last `completion_tokens -
    ids so far` of its `output_ids`.
    """
    chunks: list[GenerationChunk] = []
    burst = _Burst(already_received)
    for event in events:
        if not burst.add(event):
            chunks.append(burst.chunk())
            burst = _Burst(burst.received)
            burst.add(event)
        if burst.finish is not None:
            break
    chunks.append(burst.chunk())
    return chunks


class _Burst:
    """The events of one chunk, their lists joined as they come and made arrays once (`chunk`)."""

    def __init__(self, received: int) -> None:
        self.received = received
        self.ids: list[Any] = []
        self.triples: list[Any] = []
        self.tops: list[Any] | None = None
        self.finish: Finish | None = None
        self.prompt_tokens: int | None = None
        self.cached_tokens: int | None = None
        self.weight_version: str | None = None
        self._borrowed = False
        """Whether `ids` and `triples` are an event's own lists."""

    def add(self, reply: Any) -> bool:
        """Take one event (or a whole reply); False, taking nothing, when it has another weight version than the
        ids taken so far (it starts the next chunk)."""
        try:
            meta = reply["meta_info"]
            output_ids, triples, version = (
                reply["output_ids"],
                meta["output_token_logprobs"],
                meta.get("weight_version"),
            )
        except (KeyError, TypeError, AttributeError):
            checked = self._checked(reply)
            if checked is None:
                return True
            meta, output_ids, triples, version = checked
        if version is not None:
            version = str(version)
            if self.ids and self.weight_version is not None and version != self.weight_version:
                return False
            self.weight_version = version
        received = self.received
        total = meta.get("completion_tokens", received + len(output_ids))
        new = total - received
        if not isinstance(output_ids, list) or not isinstance(triples, list) or new < 0 or new > len(output_ids):
            raise EngineResponseError(
                ENGINE, f"reply says {total} ids so far after {received}, but has {len(output_ids)} output_ids"
            )
        if len(triples) < new:
            raise EngineResponseError(ENGINE, f"{len(output_ids)} output_ids but {len(triples)} output_token_logprobs")
        if "output_top_logprobs" in meta:
            positions = meta["output_top_logprobs"]
            if not isinstance(positions, list) or len(positions) < new:
                raise EngineResponseError(ENGINE, f"{new} new output ids but output_top_logprobs is {positions!r:.100}")
            if self.tops is None:
                self.tops = []
            self.tops += positions[len(positions) - new :]
        # A whole reply's lists are used as they are (slicing 32k items copies them for nothing), and copied only
        # when a later event extends them.
        if not self.ids and new == len(output_ids) and new == len(triples):
            self.ids, self.triples, self._borrowed = output_ids, triples, True
        elif new:
            if self._borrowed:
                self.ids, self.triples, self._borrowed = list(self.ids), list(self.triples), False
            self.ids += output_ids[len(output_ids) - new :]
            self.triples += triples[len(triples) - new :]
        self.received = total
        reason, prompt_tokens, cached_tokens = (
            meta.get("finish_reason"),
            meta.get("prompt_tokens"),
            meta.get("cached_tokens"),
        )
        if reason is not None:
            self.finish = parse_finish_reason(reason)
        if prompt_tokens is not None:
            self.prompt_tokens = prompt_tokens
        if cached_tokens is not None:
            self.cached_tokens = cached_tokens
        return True

    def _checked(self, reply: Any) -> tuple[JsonObject, Any, Any, Any] | None:
        """An event's fields where one is missing or of another type: the error that names it, or None for a
        request aborted before prefill (queued when its client left), which ends with no ids at all."""
        meta = require(ENGINE, reply, "meta_info", "")
        if "output_ids" not in reply:
            finish = parse_finish_reason(meta.get("finish_reason"))
            if finish is not None and finish.kind is FinishKind.ABORT:
                self.finish, self.prompt_tokens, self.cached_tokens = finish, meta.get("prompt_tokens"), 0
                return None
        output_ids = require(ENGINE, reply, "output_ids", "")
        return meta, output_ids, require(ENGINE, meta, "output_token_logprobs", "meta_info"), meta.get("weight_version")

    def chunk(self) -> GenerationChunk:
        try:
            ids = token_ids(self.ids)
            logprobs = logprob_values([triple[0] for triple in self.triples])  # faster than itemgetter/zip (measured)
        except (TypeError, IndexError, OverflowError) as exc:
            detail = f"malformed output_ids or output_token_logprobs: {exc}"
            raise EngineResponseError(ENGINE, detail, fault="malformed") from exc
        return GenerationChunk(
            ids=ids,
            logprobs=logprobs,
            finish=self.finish,
            prompt_tokens=self.prompt_tokens,
            cached_tokens=self.cached_tokens,
            weight_version=self.weight_version,
            top_logprobs=_top_logprobs(self.tops) if self.tops is not None else (),
        )


def _top_logprobs(positions: list[Any]) -> tuple[TopLogprobs, ...]:
    """`output_top_logprobs` positions (lists of `[logprob, id, text|null]`) as (id, logprob) pairs."""
    try:
        return tuple(tuple((int(entry[1]), float(entry[0])) for entry in position or ()) for position in positions)
    except (TypeError, IndexError, ValueError) as exc:
        raise EngineResponseError(ENGINE, f"malformed output_top_logprobs: {exc}") from exc


def parse_finish_reason(reason: Any) -> Finish | None:
    """SGLang's `finish_reason`: `null` (unfinished), `{"type": "stop", "matched": id|str|null}`,
    `{"type": "length", "length": n}`, `{"type": "abort", "message": ...}`; a bare string in older replies."""
    if reason is None:
        return None
    kind_name = reason.get("type") if isinstance(reason, dict) else reason
    try:
        kind = FinishKind(kind_name)
    except ValueError as exc:
        raise EngineResponseError(ENGINE, f"unknown finish_reason {reason!r}", fault="unknown_finish") from exc
    if not isinstance(reason, dict):
        return Finish(kind)
    matched = reason.get("matched")
    message = reason.get("message")
    status = reason.get("status_code")
    if kind is FinishKind.ABORT and isinstance(status, int) and status >= 400:
        # SGLang reports a request it refused in the scheduler (prompt too long, ...) as an abort with a status.
        error = EngineRequestError if status < 500 else EngineResponseError
        raise error(ENGINE, f"{message or reason.get('err_type') or 'request failed'}", status=status)
    return Finish(
        kind,
        matched_token_id=matched if isinstance(matched, int) and not isinstance(matched, bool) else None,
        matched_text=matched if isinstance(matched, str) else None,
        detail=str(message) if message else "",
    )


def _headers(request: GenerateRequest) -> dict[str, str]:
    if request.session_id is None:
        return {}
    return {ROUTING_HEADER: request.session_id, SESSION_HEADER: request.session_id}
