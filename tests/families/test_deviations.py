"""Deviations shared by several fixed templates hold in every family that declares them."""

from __future__ import annotations

import pytest

from tests.conftest import family_tito
from tito.families import get_family, list_families
from tito.families.deviations import VERBATIM_ASSISTANT_CONTENT

QUOTING_THINK_TAGS = "Summary: tool said <think>x</think> then OK"
FIXED_FAMILIES = [name for name in list_families() if name != "default"]


@pytest.mark.parametrize("family", FIXED_FAMILIES)
def test_an_assistant_quoting_think_tags_renders_its_content_verbatim(family: str) -> None:
    tt = family_tito(family)
    messages = [
        {"role": "user", "content": "Summarise."},
        {"role": "assistant", "content": QUOTING_THINK_TAGS},
        {"role": "user", "content": "Go on."},
    ]
    assert QUOTING_THINK_TAGS in tt.render(messages, add_generation_prompt=True)


@pytest.mark.parametrize("family", ["qwen3", "qwennext", "qwen35", "glm47", "minimax_m25", "minimax_m27"])
def test_families_whose_official_template_splits_content_declare_the_deviation(family: str) -> None:
    assert VERBATIM_ASSISTANT_CONTENT in get_family(family).deviations
