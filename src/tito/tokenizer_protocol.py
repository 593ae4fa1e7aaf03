"""The Tokenizer protocol: everything tito reads of a tokenizer, in a leaf module every layer may import.

`transformers` fast tokenizers and tito's LocalTokenizer both fit. Imports nothing from tito and nothing heavy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Tokenizer(Protocol):
    """What tito needs of a tokenizer: ids in and out, token lookups, its size, special tokens and chat template."""

    chat_template: str | None
    """The checkpoint's own template (read by the `default` family only)."""

    @property
    def special_tokens_map(self) -> Mapping[str, Any]: ...

    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = ...) -> str: ...

    def convert_tokens_to_ids(self, tokens: str) -> Any: ...

    def convert_ids_to_tokens(self, ids: int) -> Any: ...

    def __len__(self) -> int:
        """The number of ids, added tokens included: every valid id is below it."""
        ...
