"""The tokenizer a family renders with when none is given: the real one a registry package ships, else a
stand-in (proxy): the Qwen3 vocabulary plus the family's markers as special tokens.

`tito render`, `tito verify`, `tito serve`, the docs generator and the tests take it from here, so the CLI
announces a stand-in in one wording (`stand_in_notice`) wherever it renders with one.

Imports from tito: errors, families, tokenizer_loading, tokenizer_protocol.
"""

from __future__ import annotations

from tito.errors import ConfigurationError
from tito.families.registry import get_family
from tito.tokenizer_loading import build_proxy_tokenizer, load_tokenizer
from tito.tokenizer_protocol import Tokenizer

STAND_IN = "proxy: Qwen3 vocabulary + the family's markers as special tokens"
"""How a stand-in tokenizer is described wherever it is used."""


def builtin_tokenizer_for(family: str) -> tuple[Tokenizer, str]:
    """The family's real tokenizer when a registry package ships it, else a stand-in with its markers; and which."""
    declared = get_family(family)
    if declared.builtin_tokenizer is not None:
        return load_tokenizer(declared.builtin_tokenizer), f"real {declared.builtin_tokenizer} tokenizer"
    if declared.probed:
        raise ConfigurationError(
            f"the {declared.name} family probes a checkpoint's own template: pass --tokenizer DIR, a tokenizer with "
            "its chat_template"
        )
    markers = tuple(dict.fromkeys([*declared.special_tokens, *declared.stop_tokens]))
    return build_proxy_tokenizer(markers), STAND_IN


def stand_in_notice(family: str) -> str | None:
    """The line the CLI prints when `family`'s builtin tokenizer is a stand-in; None when it is the real one."""
    declared = get_family(family)
    if declared.builtin_tokenizer is not None or declared.probed:
        return None
    return (
        f"note: {declared.name} is tokenized with a stand-in tokenizer ({STAND_IN}): the text is the family's, the "
        "ids are not the model's; pass --tokenizer DIR for the real ones"
    )
