"""Model families: the registry, the Family value and the per-family declarations.

Imports from tito: families.base, families.registry.
"""

from tito.families.base import (
    VALID_APPEND_ROLES,
    Family,
    FixedTemplate,
    Junction,
    ProbeReport,
    RenderContext,
    ToolArguments,
)
from tito.families.registry import fixed_families, get_family, list_families, resolve_fixed_chat_template

__all__ = [
    "VALID_APPEND_ROLES",
    "Family",
    "FixedTemplate",
    "Junction",
    "ProbeReport",
    "RenderContext",
    "ToolArguments",
    "fixed_families",
    "get_family",
    "list_families",
    "resolve_fixed_chat_template",
]
