"""One TitoTokenizer per distinct (chat-template kwargs, allowed roles): built once, reused by every turn.

Per-request `chat_template_kwargs` merge over the session's and the launch kwargs; the library checks them
(an unknown kwarg, one the family's template never reads, or a contradicted pinned kwarg: ConfigurationError, 400).

Imports from tito: content_tokens, families, prompt_buffers, tokenizer, tokenizer_protocol.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from tito.content_tokens import ContentSpecialTokens
from tito.families.base import Family
from tito.families.registry import get_family
from tito.prompt_buffers import PromptBuffers
from tito.tokenizer import TitoTokenizer
from tito.tokenizer_protocol import Tokenizer


class TokenizerPool:
    """TitoTokenizers of one tokenizer and family, by effective kwargs and allowed roles; the least recently used
    beyond `capacity` are dropped (clients choose per-request kwargs, so the set of combinations is theirs)."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        family: str,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        allowed_append_roles: Sequence[str] | None = None,
        content_special_tokens: ContentSpecialTokens = None,
        capacity: int = 64,
    ) -> None:
        self.tokenizer = tokenizer
        self.capacity = capacity
        self.content_special_tokens = content_special_tokens
        self.launch_kwargs = dict(chat_template_kwargs or {})
        self.allowed_append_roles = tuple(allowed_append_roles) if allowed_append_roles is not None else None
        self._family = family
        self._pool: OrderedDict[str, TitoTokenizer] = OrderedDict()
        self.prompt_buffers = PromptBuffers()
        """The buffers every tokenizer of the pool writes prompts into (`tito.prompt_buffers`): one bound per server."""
        self.default = self.get()

    @property
    def family(self) -> Family:
        return self.default.family

    def get(
        self,
        session_kwargs: Mapping[str, Any] | None = None,
        request_kwargs: Mapping[str, Any] | None = None,
        allowed_append_roles: Sequence[str] | None = None,
    ) -> TitoTokenizer:
        """The TitoTokenizer for launch kwargs < session kwargs < request kwargs, under the given role gate."""
        if not session_kwargs and not request_kwargs and allowed_append_roles is None and self._pool:
            return self.default
        kwargs = {**self.launch_kwargs, **(session_kwargs or {}), **(request_kwargs or {})}
        roles = tuple(allowed_append_roles) if allowed_append_roles is not None else self.allowed_append_roles
        key = json.dumps([kwargs, roles], sort_keys=True, default=str)
        found = self._pool.get(key)
        if found is not None:
            self._pool.move_to_end(key)
        else:
            found = TitoTokenizer(
                self.tokenizer,
                get_family(self._family),
                kwargs,
                roles,
                content_special_tokens=self.content_special_tokens,
                prompt_buffers=self.prompt_buffers,
            )
            self._pool[key] = found
            while len(self._pool) > self.capacity:
                self._pool.popitem(last=False)  # `default` stays referenced as an attribute
        return found
