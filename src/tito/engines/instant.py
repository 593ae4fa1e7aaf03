"""`instant`: an in-process engine that answers with scripted ids at once, for benchmarks and tests.

It is a benchmark/test engine, documented as such: it measures tito's own overhead (no model time) and
drives the session server through scripted completions. It still honours the protocol exactly:
`max_new_tokens` cuts with finish `length`, a stop token ends the reply (kept as the last id), abort ends
a running stream with the ids so far, and logprobs are deterministic per (prompt, position) so two runs
give bit-identical samples. Asked for top logprobs, it gives the scripted id alone at each position: a script
has no alternatives.

Imports nothing from tito but engines.protocol and errors.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterator, Callable, Sequence

from tito.engines.protocol import (
    EngineInfo,
    Finish,
    FinishKind,
    GenerateRequest,
    Generation,
    GenerationChunk,
    LogprobSemantics,
    Timings,
    TopLogprobs,
    logprob_values,
    token_ids,
)

ReplyScript = Callable[[GenerateRequest], Sequence[int]]
"""Given the request, the ids the engine 'samples' (a stop token inside ends the reply there)."""


class InstantEngine:
    """Answers every request with the ids its script returns, immediately (or `token_delay` seconds per id)."""

    def __init__(
        self,
        script: ReplyScript | Sequence[int],
        *,
        model: str = "instant",
        max_context: int | None = None,
        chunk_size: int = 1,
        token_delay: float = 0.0,
        record_requests: bool = True,
    ) -> None:
        self._script: ReplyScript = script if callable(script) else _constant(tuple(script))
        self._info = EngineInfo("instant", model, max_context, LogprobSemantics.AFTER_TEMPERATURE, max_top_logprobs=20)
        self._chunk_size = max(1, chunk_size)
        self._token_delay = token_delay
        self._aborted: set[str] = set()
        self._record_requests = record_requests
        self.requests: list[GenerateRequest] = []
        """Every request received, in order, when `record_requests`: tests read what the server sent. Each holds its
        prompt (and the buffer it was written in, which no later prompt can then reuse: `tito.prompt_buffers`), so
        a served engine or a measurement keeps none."""

    @property
    def info(self) -> EngineInfo:
        return self._info

    def _record(self, request: GenerateRequest) -> None:
        if self._record_requests:
            self.requests.append(request)

    async def generate(self, request: GenerateRequest) -> Generation:
        self._record(request)
        ids, finish = self._reply(request)
        if self._token_delay:
            await asyncio.sleep(self._token_delay * len(ids))
        if request.request_id in self._aborted:
            self._aborted.discard(request.request_id)
            finish = Finish(FinishKind.ABORT, detail="aborted by the client")
        return Generation(
            output_ids=token_ids(ids),
            output_logprobs=logprob_values(_logprob(request, i) for i in range(len(ids))),
            finish=finish,
            prompt_tokens=len(request.prompt_ids),
            timings=Timings(total=self._token_delay * len(ids)),
            top_logprobs=_top_logprobs(request, ids, 0),
        )

    async def stream(self, request: GenerateRequest) -> AsyncIterator[GenerationChunk]:
        self._record(request)
        ids, finish = self._reply(request)
        for start in range(0, len(ids), self._chunk_size):
            if request.request_id in self._aborted:
                self._aborted.discard(request.request_id)
                yield GenerationChunk(token_ids(), logprob_values(), Finish(FinishKind.ABORT), len(request.prompt_ids))
                return
            part = ids[start : start + self._chunk_size]
            if self._token_delay:
                await asyncio.sleep(self._token_delay * len(part))
            last = start + self._chunk_size >= len(ids)
            yield GenerationChunk(
                token_ids(part),
                logprob_values(_logprob(request, start + i) for i in range(len(part))),
                finish if last else None,
                len(request.prompt_ids) if last else None,
                0 if last else None,
                top_logprobs=_top_logprobs(request, part, start),
            )
        if not ids:
            yield GenerationChunk(token_ids(), logprob_values(), finish, len(request.prompt_ids), 0)

    async def health(self) -> None:
        return None

    async def abort(self, request_id: str) -> None:
        self._aborted.add(request_id)

    async def aclose(self) -> None:
        return None

    def _reply(self, request: GenerateRequest) -> tuple[list[int], Finish]:
        script = list(self._script(request))
        stops = set(request.sampling.stop_token_ids)
        for position, token in enumerate(script):
            if position >= request.sampling.max_new_tokens:
                return script[:position], Finish(FinishKind.LENGTH)
            if token in stops:
                return script[: position + 1], Finish(FinishKind.STOP, matched_token_id=token)
        if len(script) > request.sampling.max_new_tokens:
            return script[: request.sampling.max_new_tokens], Finish(FinishKind.LENGTH)
        return script, Finish(FinishKind.STOP)


def _constant(ids: tuple[int, ...]) -> ReplyScript:
    def script(request: GenerateRequest) -> Sequence[int]:
        return ids

    return script


def _logprob(request: GenerateRequest, position: int) -> float:
    """A deterministic logprob in (-4, 0] for the id at `position`, keyed by the prompt's length and position."""
    key = f"{len(request.prompt_ids)}:{request.prompt_ids[-1] if request.prompt_ids else -1}:{position}"
    return -(zlib.crc32(key.encode()) % 4096) / 1024.0


def _top_logprobs(request: GenerateRequest, ids: Sequence[int], start: int) -> tuple[TopLogprobs, ...]:
    """When asked: each scripted id as its position's only candidate, with its logprob."""
    if not request.sampling.top_logprobs:
        return ()
    return tuple(((token, _logprob(request, start + i)),) for i, token in enumerate(ids))
