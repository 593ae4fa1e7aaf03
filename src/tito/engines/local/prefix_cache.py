"""Per-session prefix KV caches, least recently used evicted first when their bytes exceed the budget.

A session's next turn starts with the ids of its previous one, so keeping that turn's KV cache means the
next prefill costs only the new tokens. Only the engine's worker thread touches a `PrefixCache` (no locks).

Imports nothing from tito.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import DynamicCache


@dataclass
class CachedPrefix:
    """The ids whose keys and values `cache` holds, in order."""

    ids: array[int]
    cache: DynamicCache

    @property
    def nbytes(self) -> int:
        tensors = (getattr(layer, name, None) for layer in self.cache.layers for name in ("keys", "values"))
        return sum(tensor.nbytes for tensor in tensors if isinstance(tensor, torch.Tensor))

    def reuse_for(self, prompt_ids: Sequence[int]) -> int:
        """Crop to the longest common prefix with `prompt_ids`, leaving >= 1 prompt id to prefill; the kept length."""
        common = 0
        for stored, wanted in zip(self.ids, prompt_ids, strict=False):
            if stored != wanted:
                break
            common += 1
        keep = min(common, len(prompt_ids) - 1)
        if keep < len(self.ids):
            self.cache.crop(keep - len(self.ids))
            del self.ids[keep:]
        return keep


class PrefixCache:
    """Session id -> `CachedPrefix`; a running request takes its session's entry out and puts it back when done."""

    def __init__(self, capacity_bytes: int) -> None:
        self.capacity_bytes = capacity_bytes
        self._entries: OrderedDict[str, tuple[CachedPrefix, int]] = OrderedDict()
        self._bytes = 0

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def take(self, session_id: str) -> CachedPrefix | None:
        """Remove and return the session's entry (so two concurrent turns of a session never share one)."""
        found = self._entries.pop(session_id, None)
        if found is None:
            return None
        self._bytes -= found[1]
        return found[0]

    def put(self, session_id: str, entry: CachedPrefix) -> None:
        """Store as most recently used, then evict the least recently used entries beyond the budget."""
        self.take(session_id)
        size = entry.nbytes
        if size > self.capacity_bytes:
            return
        self._entries[session_id] = (entry, size)
        self._bytes += size
        while self._bytes > self.capacity_bytes:
            _, (_, evicted) = self._entries.popitem(last=False)
            self._bytes -= evicted
