"""Per-session prefix caches: crop to the common prefix (always leaving one id to prefill), LRU eviction by bytes."""

from __future__ import annotations

import torch
from transformers import DynamicCache

from tito.engines.local.prefix_cache import CachedPrefix, PrefixCache
from tito.engines.protocol import token_ids

BYTES_PER_TOKEN = 2 * 1 * 2 * 8 * 4  # keys + values, 1 sequence, 2 heads, head_dim 8, float32


def cached(ids: list[int]) -> CachedPrefix:
    cache = DynamicCache()
    cache.update(torch.zeros(1, 2, len(ids), 8), torch.zeros(1, 2, len(ids), 8), 0)
    return CachedPrefix(token_ids(ids), cache)


def test_reuse_keeps_the_common_prefix_and_crops_the_rest() -> None:
    entry = cached([1, 2, 3, 4, 5])
    assert entry.reuse_for([1, 2, 3, 9, 9, 9]) == 3
    assert entry.ids.tolist() == [1, 2, 3] and entry.cache.get_seq_length() == 3


def test_reuse_leaves_at_least_one_prompt_id_to_prefill() -> None:
    entry = cached([1, 2, 3])
    assert entry.reuse_for([1, 2, 3]) == 2
    assert entry.cache.get_seq_length() == 2


def test_a_longer_prompt_reuses_everything_stored() -> None:
    entry = cached([1, 2, 3])
    assert entry.reuse_for([1, 2, 3, 4]) == 3
    assert entry.cache.get_seq_length() == 3


def test_the_least_recently_used_session_is_evicted_past_the_budget() -> None:
    store = PrefixCache(capacity_bytes=10 * BYTES_PER_TOKEN)
    store.put("a", cached([1] * 4))
    store.put("b", cached([2] * 4))
    assert store.nbytes == 8 * BYTES_PER_TOKEN
    store.put("a", store.take("a") or cached([]))  # "a" used again: "b" is now the oldest
    store.put("c", cached([3] * 4))
    assert store.take("b") is None
    assert store.take("a") is not None and store.take("c") is not None
    assert store.nbytes == 0


def test_an_entry_larger_than_the_budget_is_not_kept() -> None:
    store = PrefixCache(capacity_bytes=2 * BYTES_PER_TOKEN)
    store.put("big", cached([1] * 3))
    assert len(store) == 0 and store.take("big") is None
