"""One TitoTokenizer per distinct (chat-template kwargs, allowed roles): built once, reused by every turn.

Per-request `chat_template_kwargs` merge over the session's and the launch kwargs; a contradicted pinned kwarg
is the library's ConfigurationError (400), an unknown kwarg (one the family's template never reads) is a 400
here. `_known_kwargs` is the one place that decides what a template reads (the library will take this over).

Imports nothing from tito but errors, the tokenizer, rendering and families.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from jinja2 import meta

from tito.errors import ConfigurationError
from tito.families.base import Family
from tito.families.registry import get_family
from tito.rendering import compile_template
from tito.tokenizer import TitoTokenizer
from tito.tokenizer_loading import Tokenizer

_TEMPLATE_GLOBALS = frozenset({"messages", "tools", "documents", "add_generation_prompt", "raise_exception",
                               "strftime_now", "bos_token", "eos_token", "pad_token", "unk_token"})  # fmt: skip


def _known_kwargs(family: Family, tokenizer: Tokenizer) -> frozenset[str] | None:
    """The kwargs the family's template reads; None when it cannot be told (Python encoders accept their own)."""
    if family.encoder is not None:
        return None
    if family.fixed_template.template is not None:
        source = family.fixed_template.source()
    else:
        source = getattr(tokenizer, "chat_template", None) or ""
    environment = compile_template(source).environment
    read = meta.find_undeclared_variables(environment.parse(source))
    return frozenset(read - _TEMPLATE_GLOBALS) | frozenset(family.fixed_template.extra_kwargs)


class TokenizerPool:
    """TitoTokenizers of one tokenizer and family, by effective kwargs and allowed roles."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        family: str,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        allowed_append_roles: Sequence[str] | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.launch_kwargs = dict(chat_template_kwargs or {})
        self.allowed_append_roles = tuple(allowed_append_roles) if allowed_append_roles is not None else None
        self._known = _known_kwargs(get_family(family), tokenizer)
        self._family = family
        self._pool: dict[str, TitoTokenizer] = {}
        self._stop_ids: dict[int, tuple[int, ...]] = {}
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
            return found
        if self._known is not None:
            unknown = sorted(set(kwargs) - self._known)
            if unknown:
                raise ConfigurationError(
                    f"family {self._family!r}: chat_template_kwargs {unknown} are not read by its template "
                    f"(it reads: {', '.join(sorted(self._known)) or 'none'})"
                )
        tito_tokenizer = TitoTokenizer(self.tokenizer, get_family(self._family), kwargs, roles)
        self._pool[key] = tito_tokenizer
        return tito_tokenizer

    def stop_token_ids(self, tito_tokenizer: TitoTokenizer) -> tuple[int, ...]:
        """The family's stop tokens as ids (the library will expose these on TitoTokenizer)."""
        found = self._stop_ids.get(id(tito_tokenizer))
        if found is None:
            encode = tito_tokenizer.tokenizer.encode
            stops = tito_tokenizer.family.stop_tokens
            found = tuple(int(encode(token, add_special_tokens=False)[0]) for token in stops)
            self._stop_ids[id(tito_tokenizer)] = found
        return found
