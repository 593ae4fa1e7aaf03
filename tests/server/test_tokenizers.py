"""The server's TitoTokenizer pool: one per kwargs and role combination, reused, and bounded."""

from __future__ import annotations

from tests.conftest import family_tokenizer
from tito.server.tokenizers import TokenizerPool


def test_combinations_are_built_once_and_the_least_recently_used_are_dropped_past_capacity() -> None:
    pool = TokenizerPool(family_tokenizer("qwen3"), "qwen3", capacity=2)
    thinking = pool.get(request_kwargs={"enable_thinking": True})
    assert pool.get(request_kwargs={"enable_thinking": True}) is thinking
    plain = pool.get(request_kwargs={"enable_thinking": False})
    assert pool.get(request_kwargs={"enable_thinking": True}) is thinking  # now the most recent
    tools_only = pool.get(allowed_append_roles=["tool"])
    assert pool.get(request_kwargs={"enable_thinking": True}) is thinking
    assert pool.get(request_kwargs={"enable_thinking": False}) is not plain  # dropped, built again
    assert pool.get(allowed_append_roles=["tool"]) is not tools_only
    assert pool.get() is pool.default
