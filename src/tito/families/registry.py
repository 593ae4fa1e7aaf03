"""The family registry: every family named once; lookups, listings and the fixed-template resolver.

Imports from tito: errors, families (its modules).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tito.errors import ConfigurationError
from tito.families import deepseek, default, glm, kimi, minimax, nemotron, qwen
from tito.families.base import Family, index_families

FAMILIES: Mapping[str, Family] = index_families(
    [
        *qwen.FAMILIES,
        *glm.FAMILIES,
        *nemotron.FAMILIES,
        *kimi.FAMILIES,
        *minimax.FAMILIES,
        *deepseek.FAMILIES,
        default.DEFAULT,
    ]
)

FAMILY_ALIASES: Mapping[str, str] = {"qwen3_next": "qwennext", "qwen3.5": "qwen35", "qwen3_5": "qwen35"}
"""Spellings users bring from other stacks; the registry name is the one tito writes."""


def list_families() -> list[str]:
    """Every registered family name, in declaration order."""
    return list(FAMILIES)


def fixed_families() -> list[str]:
    """The families with a declared template or encoder, in declaration order: every one but the probed."""
    return [name for name, family in FAMILIES.items() if not family.probed]


def get_family(name: str) -> Family:
    """The family called `name` (or a known alias); the error lists the valid names."""
    family = FAMILIES.get(FAMILY_ALIASES.get(name, name))
    if family is None:
        raise ConfigurationError(f"unknown family {name!r}; choose one of: {', '.join(FAMILIES)}")
    return family


def resolve_fixed_chat_template(family: str) -> tuple[Path | None, dict[str, Any]]:
    """The family's fixed template path (None for Python-encoder families and `default`) and a copy of
    its pinned kwargs. Depends on the family alone: allowed roles never change the template."""
    fixed = get_family(family).fixed_template
    return fixed.path, dict(fixed.extra_kwargs)
