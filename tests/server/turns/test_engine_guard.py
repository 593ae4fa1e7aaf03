"""GuardedEngine: replies checked where they enter, an aborted call ended at once, and aborts that never raise."""

from __future__ import annotations

import asyncio
import logging
import math
import re
from array import array
from collections.abc import AsyncIterator

import pytest

from tito.engines.instant import InstantEngine
from tito.engines.protocol import FinishKind, GenerateRequest, Generation, GenerationChunk, SamplingParams
from tito.errors import EngineRequestError, EngineResponseError
from tito.server.metrics import ServerMetrics
from tito.server.turns.engine_guard import GuardedEngine

VOCABULARY = 100


def request(request_id: str = "req-1") -> GenerateRequest:
    return GenerateRequest([1, 2, 3], SamplingParams(max_new_tokens=4), request_id)


class StuckEngine(InstantEngine):
    """Never answers and ignores aborts (an engine whose abort route is missing): only a cut ends its calls."""

    def __init__(self, abort_error: Exception | None = None, abort_delay: float = 0.0) -> None:
        super().__init__([5, 6])
        self.abort_error = abort_error
        self.abort_delay = abort_delay
        self.aborted: list[str] = []

    async def generate(self, request: GenerateRequest) -> Generation:
        await asyncio.sleep(30)
        raise AssertionError("not cut")

    async def stream(self, request: GenerateRequest) -> AsyncIterator[GenerationChunk]:
        async for chunk in super().stream(request):
            yield chunk
            await asyncio.sleep(30)

    async def abort(self, request_id: str) -> None:
        self.aborted.append(request_id)
        await asyncio.sleep(self.abort_delay)
        if self.abort_error is not None:
            raise self.abort_error


def faults(metrics: ServerMetrics) -> dict[tuple[str, str], float]:
    counted: dict[tuple[str, str], float] = {}
    for family in metrics.engine_faults.collect():
        for point in family.samples:
            if point.name.endswith("_total"):
                counted[point.labels["engine"], point.labels["kind"]] = point.value
    return counted


@pytest.mark.parametrize(("ids", "logprobs", "fault", "words"), [
    ([5, 100], [-0.1, -0.2], "bad_ids", "sampled id 100 at position 1 is outside the vocabulary (ids 0 to 99)"),
    ([-3, 5], [-0.1, -0.2], "bad_ids", "sampled id -3 at position 0"),
    ([5] * 35 + [-1] + [5] * 4, [-0.1] * 40, "bad_ids", "sampled id -1 at position 35"),
    ([5] * 39 + [100], [-0.1] * 40, "bad_ids", "sampled id 100 at position 39"),
    ([5, 6], [-0.1, math.nan], "bad_logprobs", "logprob nan of the sampled id at position 1 is not finite"),
    ([5, 6], [-math.inf, -0.2], "bad_logprobs", "logprob -inf of the sampled id at position 0"),
    ([5, 6], [3.5e38 * 10, -0.2], "bad_logprobs", "logprob inf"),
])  # fmt: skip
def test_a_reply_outside_the_vocabulary_or_with_a_non_finite_logprob_is_a_502_naming_it(
    ids: list[int], logprobs: list[float], fault: str, words: str
) -> None:
    guard = GuardedEngine(InstantEngine([1]), VOCABULARY, ServerMetrics())
    with pytest.raises(EngineResponseError, match=re.escape(words)) as raised:
        guard.check(array("i", ids), array("f", logprobs))
    assert (raised.value.http_status, raised.value.fault, raised.value.engine) == (502, fault, "instant")


def test_valid_replies_and_streams_pass_unchanged() -> None:
    async def both() -> tuple[Generation, list[GenerationChunk]]:
        guard = GuardedEngine(InstantEngine([5, 6, 7]), VOCABULARY, ServerMetrics())
        return await guard.generate(request()), [chunk async for chunk in guard.stream(request("req-2"))]

    generation, chunks = asyncio.run(both())
    assert list(generation.output_ids) == [5, 6, 7] and generation.finish.kind is FinishKind.STOP
    assert [i for chunk in chunks for i in chunk.ids] == [5, 6, 7] and chunks[-1].finish is not None


@pytest.mark.parametrize("abort_error", [None, EngineResponseError("instant", "/abort_request: Not Found")])
def test_an_abort_ends_the_call_at_once_even_when_the_engine_ignores_it(abort_error: Exception | None) -> None:
    async def aborted() -> tuple[Generation, list[GenerationChunk]]:
        guard = GuardedEngine(StuckEngine(abort_error), VOCABULARY, ServerMetrics())
        call = asyncio.ensure_future(guard.generate(request()))
        chunks: list[GenerationChunk] = []

        async def consume() -> None:
            async for chunk in guard.stream(request("req-2")):
                chunks.append(chunk)

        streaming = asyncio.ensure_future(consume())
        await asyncio.sleep(0.05)
        await guard.abort("req-1")
        await guard.abort("req-2")
        return await asyncio.wait_for(call, 1), (await asyncio.wait_for(streaming, 1), chunks)[1]

    generation, chunks = asyncio.run(aborted())
    assert generation.finish.kind is FinishKind.ABORT and not generation.output_ids
    assert [list(chunk.ids) for chunk in chunks] == [[5], []] and chunks[-1].finish is not None
    assert chunks[-1].finish.kind is FinishKind.ABORT


def test_a_cut_does_not_swallow_someone_elses_cancel() -> None:
    """A call cancelled by its caller (a timeout, a shutdown) and cut by an abort at the same time stays cancelled."""

    async def cancelled_and_cut() -> None:
        guard = GuardedEngine(StuckEngine(), VOCABULARY, ServerMetrics())
        call = asyncio.ensure_future(guard.generate(request()))
        await asyncio.sleep(0.01)
        call.cancel()
        await guard.abort("req-1")
        with pytest.raises(asyncio.CancelledError):
            await call

    asyncio.run(cancelled_and_cut())


@pytest.mark.parametrize(("abort_error", "abort_delay", "why"), [
    (EngineResponseError("instant", "/abort_request: Not Found", status=404), 0.0, "Not Found"),
    (EngineRequestError("instant", "bad rid", status=400), 0.0, "bad rid"),
    (RuntimeError("client closed"), 0.0, "RuntimeError: client closed"),
    (None, 1.0, "no answer in time"),
])  # fmt: skip
def test_a_failed_or_slow_abort_is_logged_and_counted_never_raised(
    abort_error: Exception | None, abort_delay: float, why: str, caplog: pytest.LogCaptureFixture
) -> None:
    metrics = ServerMetrics()
    engine = StuckEngine(abort_error, abort_delay)
    guard = GuardedEngine(engine, VOCABULARY, metrics, abort_timeout=0.05)
    with caplog.at_level(logging.WARNING, logger="tito.server.turns.engine_guard"):
        asyncio.run(guard.abort("req-9"))
    assert engine.aborted == ["req-9"]
    assert faults(metrics) == {("instant", "abort_failed"): 1.0}
    assert "abort of req-9 failed" in caplog.text and why in caplog.text
