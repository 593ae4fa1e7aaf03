"""What every family with a shipped .jinja must hold, parametrized over the registry: a new family gets these
checks by being registered. Each family's own module keeps what is its own (parity with its official template, its
declared deviations, corpora that exercise its quirks); the conformance matrix is in tests/test_conformance.py."""

from __future__ import annotations

import itertools

import pytest

from tito.conformance import TOOLS, shapes
from tito.families import fixed_families, get_family
from tito.messages import normalize_messages

from .rendering_helpers import assert_transformers_renders_alike, messages_of

TEMPLATE_FAMILIES = [name for name in fixed_families() if get_family(name).fixed_template.template is not None]


@pytest.mark.parametrize("family", TEMPLATE_FAMILIES)
def test_the_shipped_template_renders_identically_in_transformers(family: str) -> None:
    """Engines (SGLang, vLLM) render the shipped .jinja through transformers: on every prefix of every conformance
    shape, normalised as tito hands it over, with the pinned kwargs, with and without tools and generation prompt,
    transformers must give tito's bytes."""
    declared = get_family(family)
    conversations = [
        normalize_messages(messages[:end], declared.tool_arguments)
        for messages in map(messages_of, shapes())
        for end in range(2, len(messages) + 1)
    ]
    pinned = dict(declared.fixed_template.extra_kwargs)
    assert_transformers_renders_alike(family, itertools.product(conversations, (None, TOOLS), (False, True), [pinned]))
