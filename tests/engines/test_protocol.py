"""The engine protocol's stream accumulation: chunks collected as they arrive make the non-streaming Generation."""

from __future__ import annotations

import asyncio
import time
from array import array

import pytest

from tito.engines.instant import InstantEngine
from tito.engines.protocol import (
    GenerateRequest,
    SamplingParams,
    StreamCollector,
    collect_stream,
    logprob_values,
    token_ids,
)
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


@pytest.mark.parametrize("values", [[], [0, 1, -5, 2**31 - 1, -(2**31)], (3, 4), range(5), [True, 7]])
def test_token_ids_equal_the_array_of_their_values(values: list[int]) -> None:
    assert token_ids(values) == array("i", values)
    assert token_ids(values).typecode == "i"


@pytest.mark.parametrize(
    ("values", "error"), [([1, 2.5], TypeError), ([1, None], TypeError), (["7"], TypeError), ([2**31], OverflowError)]
)
def test_token_ids_of_a_bad_list_raise_what_array_raises(values: list[object], error: type[Exception]) -> None:
    with pytest.raises(error):
        token_ids(values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "values",
    [[], [-0.0, -1.2345678901234, -1e-45, -3e38, -1e300, float("-inf"), float("nan"), 0, True, 2**70], (-0.5,)],
)
def test_logprob_values_are_the_float32_bytes_array_makes_of_them(values: list[float]) -> None:
    assert logprob_values(values).tobytes() == array("f", values).tobytes()
    assert logprob_values(values).typecode == "f"


@pytest.mark.parametrize("values", [[-0.5, None], ["-1.0"], [[-0.5]]])
def test_logprob_values_of_a_bad_list_raise_what_array_raises(values: list[object]) -> None:
    with pytest.raises(TypeError):
        logprob_values(values)  # type: ignore[arg-type]
