"""tito: token in, token out. Multi-turn agent conversations kept token-exact for RL training.

The public names; the architecture (vocabulary, invariants, layers) is docs/architecture.md.
Imports from tito: _version, families, matching, tokenizer, tokenizer_loading.
"""

from tito._version import package_version
from tito.families import VALID_APPEND_ROLES, FixedTemplate, get_family, list_families, resolve_fixed_chat_template
from tito.matching import harness_message_matches, loose_tool_call_message_matches, strict_message_matches
from tito.tokenizer import TitoTokenizer, get_tito_tokenizer
from tito.tokenizer_loading import load_tokenizer

__version__ = package_version()

__all__ = [
    "VALID_APPEND_ROLES",
    "FixedTemplate",
    "TitoTokenizer",
    "get_family",
    "get_tito_tokenizer",
    "harness_message_matches",
    "list_families",
    "load_tokenizer",
    "loose_tool_call_message_matches",
    "resolve_fixed_chat_template",
    "strict_message_matches",
]
