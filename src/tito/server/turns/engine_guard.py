"""The engine as the server calls it: replies checked where they enter, a call ended when its turn is aborted, and
an abort that never fails the turn.

Every reply (each stream chunk) is checked once, in O(its ids), never against the history: each sampled id inside
the tokenizer's vocabulary and each logprob finite (NaN or inf would poison a trainer's loss). A failed check is an
`EngineResponseError` (502) naming the first bad value, so nothing invalid reaches a session.

`abort(request_id)` ends the call in flight at once with finish ABORT, whether or not the engine honours its
abort (a turn that is aborted commits nothing, so the ids sampled so far are not needed; an HTTP engine sees its
connection closed), then sends the engine's own abort, bounded by `abort_timeout`. A failed or slow abort (an
SGLang behind a router without `/abort_request`) is logged and counted (`tito_engine_faults{kind="abort_failed"}`),
never raised: the turn ends with its own reason (410 when its session was deleted), not with the abort's error.

A reply that reports no weight version (vLLM's completions) gets the one the last weight update declared
(`declared_weight_version`, set by server.turns.drain's resume), if any.

Imports from tito: engines.protocol, errors, server.metrics.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
from array import array
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass

from tito.engines.protocol import (
    Engine,
    EngineInfo,
    Finish,
    FinishKind,
    GenerateRequest,
    Generation,
    GenerationChunk,
    logprob_values,
    token_ids,
)
from tito.errors import EngineResponseError
from tito.server.metrics import ServerMetrics

logger = logging.getLogger(__name__)

_CUT = Finish(FinishKind.ABORT, detail="aborted by tito (the call was ended without waiting for the engine)")


@dataclass
class _Call:
    """One engine call in flight: the task awaiting the engine (None between two awaits) and whether it was cut."""

    task: asyncio.Task[object] | None = None
    aborted: bool = False
    cancelled: bool = False
    """True once `abort` cancelled `task` inside its await on the engine (the call takes the cancel back)."""


class GuardedEngine:
    """Wraps the server's engine (see the module docstring); `inner` is the engine itself."""

    def __init__(
        self, engine: Engine, vocabulary_size: int, metrics: ServerMetrics, *, abort_timeout: float = 5.0
    ) -> None:
        self.inner = engine
        self.vocabulary_size = vocabulary_size
        self.metrics = metrics
        self.abort_timeout = abort_timeout
        self.declared_weight_version: str | None = None
        """The weight version a weight update declared (server.turns.drain); recorded on a reply that reports none."""
        self._calls: dict[str, _Call] = {}

    @property
    def info(self) -> EngineInfo:
        return self.inner.info

    async def generate(self, request: GenerateRequest) -> Generation:
        call = self._calls[request.request_id] = _Call(task=asyncio.current_task())
        try:
            generation = await self.inner.generate(request)
        except BaseException:
            if _cut_short(call):
                return _aborted(request)
            raise
        finally:
            call.task = None
            self._calls.pop(request.request_id, None)
        if _cut_short(call):
            return _aborted(request)
        self.check(generation.output_ids, generation.output_logprobs)
        if not generation.weight_versions and self.declared_weight_version is not None:
            return dataclasses.replace(generation, weight_versions=(self.declared_weight_version,))
        return generation

    async def stream(self, request: GenerateRequest) -> AsyncIterator[GenerationChunk]:
        call = self._calls[request.request_id] = _Call()
        chunks = self.inner.stream(request)
        next_chunk = chunks.__anext__
        task = asyncio.current_task()
        finished = False
        versioned = False
        try:
            while not call.aborted:
                call.task = task
                try:
                    chunk = await next_chunk()
                except StopAsyncIteration:
                    break
                except BaseException:
                    if _cut_short(call):
                        break
                    raise
                finally:
                    call.task = None
                if call.aborted and _cut_short(call):
                    break
                self.check(chunk.ids, chunk.logprobs)
                versioned = versioned or chunk.weight_version is not None
                if chunk.finish is not None:
                    finished = True
                    if not versioned and self.declared_weight_version is not None:
                        chunk = dataclasses.replace(chunk, weight_version=self.declared_weight_version)
                yield chunk
            if call.aborted:
                yield GenerationChunk(token_ids(), logprob_values(), _CUT, len(request.prompt_ids), 0)
            elif not finished:
                raise EngineResponseError(self.info.name, "the stream ended without a finish reason", fault="cut")
        finally:
            self._calls.pop(request.request_id, None)
            if isinstance(chunks, AsyncGenerator):
                await chunks.aclose()

    async def abort(self, request_id: str) -> None:
        """End the call in flight now, then ask the engine to abort it; a failure is logged and counted."""
        call = self._calls.get(request_id)
        if call is not None and not call.aborted:
            call.aborted = True
            if call.task is not None and call.task is not asyncio.current_task():
                call.cancelled = True
                call.task.cancel()
        try:
            await asyncio.wait_for(self.inner.abort(request_id), self.abort_timeout)
        except Exception as exc:
            name = self.info.name
            self.metrics.engine_faults.labels(name, "abort_failed").inc()
            why = "no answer in time" if isinstance(exc, TimeoutError) else f"{type(exc).__name__}: {exc}"
            logger.warning("engine %r: abort of %s failed (the call was ended anyway): %s", name, request_id, why)

    async def health(self) -> None:
        await self.inner.health()

    async def aclose(self) -> None:
        await self.inner.aclose()

    def check(self, ids: array[int], logprobs: array[float]) -> None:
        """Every id inside the vocabulary and every logprob finite; else a 502 naming the first bad value."""
        size = self.vocabulary_size
        if ids and (
            max(memoryview(ids).cast("B").cast("I")) >= size  # one pass, read unsigned: a negative id is huge
            if len(ids) > 32
            else min(ids) < 0 or max(ids) >= size
        ):
            position, value = next((i, v) for i, v in enumerate(ids) if not 0 <= v < size)
            detail = f"sampled id {value} at position {position} is outside the vocabulary (ids 0 to {size - 1})"
            raise EngineResponseError(self.info.name, detail, fault="bad_ids")
        if logprobs and not math.isfinite(sum(logprobs)):
            position, logprob = next((i, v) for i, v in enumerate(logprobs) if not math.isfinite(v))
            detail = f"logprob {logprob} of the sampled id at position {position} is not finite"
            raise EngineResponseError(self.info.name, detail, fault="bad_logprobs")


def _cut_short(call: _Call) -> bool:
    """Whether `abort` ended this call; takes back the cancel it sent (False when someone else cancelled too:
    that cancel goes on)."""
    if not call.aborted:
        return False
    if call.cancelled:
        call.cancelled = False
        task = asyncio.current_task()
        if task is not None and task.uncancel() > 0:
            return False
    return True


def _aborted(request: GenerateRequest) -> Generation:
    return Generation(token_ids(), logprob_values(), _CUT, len(request.prompt_ids))
