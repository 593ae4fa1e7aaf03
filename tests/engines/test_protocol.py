"""The engine protocol's stream accumulation: chunks collected as they arrive make the non-streaming Generation."""

from __future__ import annotations

import asyncio
import time

import pytest

from tito.engines.instant import InstantEngine
from tito.engines.protocol import GenerateRequest, SamplingParams, StreamCollector, collect_stream
from tito.errors import EngineResponseError


def request(max_new_tokens: int = 16) -> GenerateRequest:
    return GenerateRequest([7, 8, 9], SamplingParams(max_new_tokens, stop_token_ids=(99,)), "req")


@pytest.mark.parametrize(("chunk_size", "max_new_tokens"), [(1, 16), (3, 16), (16, 16), (2, 3)])
def test_a_collected_stream_equals_the_whole_generation(chunk_size: int, max_new_tokens: int) -> None:
    engine = InstantEngine([1, 2, 3, 4, 5, 99, 6], chunk_size=chunk_size)
    whole = asyncio.run(engine.generate(request(max_new_tokens)))
    streamed = asyncio.run(collect_stream(engine.stream(request(max_new_tokens)), time.monotonic()))
    assert (streamed.output_ids, streamed.output_logprobs, streamed.finish, streamed.prompt_tokens) == (
        whole.output_ids, whole.output_logprobs, whole.finish, whole.prompt_tokens
    )  # fmt: skip
    assert streamed.timings.first_token is not None


def test_a_stream_without_a_finish_is_an_engine_error() -> None:
    with pytest.raises(EngineResponseError, match="without a finish reason"):
        StreamCollector(time.monotonic()).generation()
