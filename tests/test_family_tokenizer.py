"""The tokenizer a family renders with when none is given, and the one wording that announces a stand-in."""

from __future__ import annotations

import pytest

from tito.errors import ConfigurationError
from tito.families.registry import get_family
from tito.family_tokenizer import STAND_IN, builtin_tokenizer_for, stand_in_notice


def test_a_family_with_a_shipped_tokenizer_gets_the_real_one_and_no_notice() -> None:
    tokenizer, described = builtin_tokenizer_for("qwen3")
    assert described == "real qwen3 tokenizer"
    assert len(tokenizer.encode("<|im_end|>", add_special_tokens=False)) == 1
    assert stand_in_notice("qwen3") is None


def test_a_family_without_one_gets_a_stand_in_keeping_its_markers_atomic_and_a_notice() -> None:
    tokenizer, described = builtin_tokenizer_for("glm47")
    assert described == STAND_IN
    for marker in get_family("glm47").special_tokens:
        assert len(tokenizer.encode(marker, add_special_tokens=False)) == 1, marker
    notice = stand_in_notice("glm47")
    assert notice is not None and "glm47" in notice and STAND_IN in notice


def test_the_probed_family_needs_a_tokenizer_with_its_template() -> None:
    with pytest.raises(ConfigurationError, match="--tokenizer DIR"):
        builtin_tokenizer_for("default")
    assert stand_in_notice("default") is None
