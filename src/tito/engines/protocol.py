"""The engine protocol: prompt ids in, sampled ids and their logprobs out. Engines know nothing of sessions.

Every engine (SGLang and vLLM over HTTP, the embedded `local` one, the benchmark `instant` one) implements
`Engine`. Ids and logprobs travel as compact arrays (`array('i')` int32 ids, `array('f')` float32 logprobs)
from the wire onward: a 32k-token reply is 256 KB, not 32k boxed Python floats.

Imports nothing from tito but errors and path_ids.
"""

from __future__ import annotations

import enum
import struct
import time
from array import array
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from tito.errors import EngineResponseError
from tito.path_ids import packed_values

TokenIds = array
"""`array('i')`: token ids, 4 bytes each."""
Logprobs = array
"""`array('f')`: one float32 logprob per sampled id."""


TopLogprobs = tuple[tuple[int, float], ...]
"""The most likely ids at one sampled position with their logprobs (the engine's `LogprobSemantics`), best first."""


def token_ids(values: Iterable[int] = ()) -> array[int]:
    """A compact int32 id array.

    A list (a decoded JSON reply) is packed by `struct` in one C loop: twice as fast as `array` converting item by
    item (0.2 ms for 32k ids). Should it fail, `array` converts it again to raise its own TypeError/OverflowError.
    """
    if isinstance(values, list):
        try:
            return array("i", packed_values("i", values))
        except struct.error:
            pass
    return array("i", values)


def logprob_values(values: Iterable[float] = ()) -> array[float]:
    """A compact float32 logprob array.

    A list is packed by `struct` in one C loop, as `token_ids` does: twice as fast as `array` (7 vs 2.5 us for 300
    logprobs), the same float32 bytes (a C cast of each double, inf past float32's range either way). Should it
    fail, `array` converts it again to raise its own TypeError."""
    if isinstance(values, list):
        try:
            return array("f", packed_values("f", values))
        except struct.error:
            pass
    return array("f", values)


class LogprobSemantics(enum.Enum):
    """What an engine's sampled-token logprob is the log of; samples carry it so a trainer compares like with like."""

    AFTER_TEMPERATURE = "after_temperature"
    """log softmax(logits / T) of the sampled id (SGLang; tito's local engine)."""
    BEFORE_TEMPERATURE = "before_temperature"
    """log softmax(logits) of the sampled id, before temperature and other processors (vLLM's default)."""


class FinishKind(enum.Enum):
    STOP = "stop"
    """A stop token (kept as the last sampled id) or a stop string ended the generation."""
    LENGTH = "length"
    """`max_new_tokens` or the engine's context limit cut it."""
    ABORT = "abort"
    """Aborted (by `abort(request_id)` or by the engine); the ids sampled so far are kept."""


@dataclass(frozen=True)
class Finish:
    """Why a generation ended; for STOP, what matched (a token id, or a stop string)."""

    kind: FinishKind
    matched_token_id: int | None = None
    matched_text: str | None = None
    detail: str = ""
    """The engine's own words when it gave any (e.g. the reason of an abort)."""


@dataclass(frozen=True)
class SamplingParams:
    """Sampling parameters every engine understands; `None` means the engine's default."""

    max_new_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int | None = None
    min_p: float = 0.0
    stop_token_ids: tuple[int, ...] = ()
    """The family's stop tokens (and the caller's); a matched one is kept as the last sampled id."""
    stop: tuple[str, ...] = ()
    """Stop strings, from the agent's request."""
    seed: int | None = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    top_logprobs: int = 0
    """How many of the most likely ids (with logprobs) to return at each sampled position; 0: none."""
    json_schema: str | None = None
    """Constrained decoding: the sampled text is JSON valid under this JSON schema (its JSON text); only for an
    engine whose `EngineInfo.structured_output` says it can (the server refuses the request otherwise)."""


@dataclass(frozen=True)
class GenerateRequest:
    prompt_ids: Sequence[int]
    sampling: SamplingParams
    request_id: str
    """Unique per engine call; `abort(request_id)` names it."""
    session_id: str | None = None
    """Routing key: a consistent-hash router keeps a session on one worker (and its prefix cache)."""


@dataclass(frozen=True)
class Timings:
    """Seconds, measured by the engine client (monotonic clock)."""

    total: float = 0.0
    """From sending the request to the last byte."""
    first_token: float | None = None
    """From sending the request to the first sampled id (streaming); None when not measured."""


@dataclass(frozen=True)
class Generation:
    """What one engine call sampled, with the facts a training sample needs."""

    output_ids: array[int]
    """The sampled ids, the matched stop token kept as the last one."""
    output_logprobs: array[float]
    """One logprob per sampled id (see the engine's `LogprobSemantics`)."""
    finish: Finish
    prompt_tokens: int
    cached_tokens: int = 0
    """Prompt tokens the engine did not prefill again (prefix cache)."""
    weight_versions: tuple[str, ...] = ()
    """The weight version(s) the engine reported while sampling, in order (several when updated mid-request)."""
    timings: Timings = field(default_factory=Timings)
    top_logprobs: tuple[TopLogprobs, ...] = ()
    """One entry per sampled id when `SamplingParams.top_logprobs` asked for them, else empty."""

    def __post_init__(self) -> None:
        if len(self.output_ids) != len(self.output_logprobs):
            raise EngineResponseError(
                "protocol",
                f"{len(self.output_ids)} sampled ids but {len(self.output_logprobs)} logprobs",
            )
        if self.top_logprobs and len(self.top_logprobs) != len(self.output_ids):
            raise EngineResponseError(
                "protocol", f"{len(self.output_ids)} sampled ids but {len(self.top_logprobs)} top-logprob entries"
            )


@dataclass(frozen=True)
class GenerationChunk:
    """Newly sampled ids (only the new ones, never cumulative) and their logprobs; the last chunk has `finish`."""

    ids: array[int]
    logprobs: array[float]
    finish: Finish | None = None
    prompt_tokens: int | None = None
    """Known at the latest on the last chunk."""
    cached_tokens: int | None = None
    weight_version: str | None = None
    top_logprobs: tuple[TopLogprobs, ...] = ()
    """One entry per id of `ids` when asked for (see `Generation.top_logprobs`)."""


@dataclass(frozen=True)
class EngineInfo:
    """What a sample records about the engine that produced it."""

    name: str
    """`sglang`, `vllm`, `local`, `instant`."""
    model: str
    max_context: int | None
    logprob_semantics: LogprobSemantics
    max_top_logprobs: int = 0
    """The most `SamplingParams.top_logprobs` it can return per position (0: none)."""
    structured_output: bool = False
    """Whether it honours `SamplingParams.json_schema` (SGLang's and vLLM's own json-schema sampling)."""


@runtime_checkable
class Engine(Protocol):
    """An inference engine: ids in, ids and logprobs out."""

    @property
    def info(self) -> EngineInfo: ...

    async def generate(self, request: GenerateRequest) -> Generation:
        """Sample a whole completion."""
        ...

    def stream(self, request: GenerateRequest) -> AsyncIterator[GenerationChunk]:
        """Sample a completion chunk by chunk as the engine produces it; the last chunk carries the finish."""
        ...

    async def health(self) -> None:
        """Return when the engine can serve; raise `EngineUnavailableError` (with its words) when it cannot."""
        ...

    async def abort(self, request_id: str) -> None:
        """Stop the request; its generate/stream ends with finish ABORT and the ids sampled so far."""
        ...

    async def aclose(self) -> None:
        """Release connections, threads and memory."""
        ...


@runtime_checkable
class SessionReleasing(Protocol):
    """An engine behind a router that keeps sticky sessions (SGLang and vLLM over HTTP): the server releases a
    session there when the session ends, so the router's table does not grow without bound."""

    async def release_session(self, session_id: str) -> bool:
        """End the session's sticky entry; False when nothing in front keeps one (no release route)."""
        ...


class StreamCollector:
    """Accumulates stream chunks, as they arrive, into the `Generation` the non-streaming call returns (same ids,
    logprobs, finish).

    `started` is the `time.monotonic()` at which the request was sent; the first-token time is taken when the
    first non-empty chunk is added.
    """

    def __init__(self, started: float) -> None:
        self.started = started
        self.ids = token_ids()
        self.logprobs = logprob_values()
        self.top_logprobs: list[TopLogprobs] = []
        self.finish: Finish | None = None
        self.prompt_tokens = 0
        self.cached_tokens = 0
        self.versions: list[str] = []
        self.first_token: float | None = None

    def add(self, chunk: GenerationChunk) -> None:
        if chunk.ids and self.first_token is None:
            self.first_token = time.monotonic() - self.started
        self.ids.extend(chunk.ids)
        self.logprobs.extend(chunk.logprobs)
        self.top_logprobs.extend(chunk.top_logprobs)
        if chunk.prompt_tokens is not None:
            self.prompt_tokens = chunk.prompt_tokens
        if chunk.cached_tokens is not None:
            self.cached_tokens = chunk.cached_tokens
        if chunk.weight_version is not None and (not self.versions or self.versions[-1] != chunk.weight_version):
            self.versions.append(chunk.weight_version)
        if chunk.finish is not None:
            self.finish = chunk.finish

    def generation(self) -> Generation:
        """The whole generation; the stream must have ended with a finish."""
        if self.finish is None:
            raise EngineResponseError("stream", "the stream ended without a finish reason")
        return Generation(
            output_ids=self.ids,
            output_logprobs=self.logprobs,
            finish=self.finish,
            prompt_tokens=self.prompt_tokens,
            cached_tokens=self.cached_tokens,
            weight_versions=tuple(self.versions),
            timings=Timings(total=time.monotonic() - self.started, first_token=self.first_token),
            top_logprobs=tuple(self.top_logprobs),
        )


async def collect_stream(chunks: AsyncIterator[GenerationChunk], started: float) -> Generation:
    """Accumulate a whole stream into the `Generation` the non-streaming call returns (see StreamCollector)."""
    collector = StreamCollector(started)
    async for chunk in chunks:
        collector.add(chunk)
    return collector.generation()
