"""tito: token in, token out. Multi-turn agent conversations kept token-exact for RL training."""

from tito.families import VALID_APPEND_ROLES, FixedTemplate, get_family, list_families, resolve_fixed_chat_template
from tito.tokenizer import TitoTokenizer, get_tito_tokenizer
from tito.tokenizer_loading import load_tokenizer

__all__ = [
    "VALID_APPEND_ROLES",
    "FixedTemplate",
    "TitoTokenizer",
    "get_family",
    "get_tito_tokenizer",
    "list_families",
    "load_tokenizer",
    "resolve_fixed_chat_template",
]
