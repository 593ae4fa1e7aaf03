"""Every family's output_format binds to a parser, in one registry."""

from __future__ import annotations

import pytest

from tito.errors import ConfigurationError
from tito.families.registry import FAMILIES
from tito.parsing import OUTPUT_FORMATS
from tito.parsing.grammar import THINK_CLOSE, THINK_OPEN
from tito.parsing.registry import get_output_format


@pytest.mark.parametrize("name", list(FAMILIES))
def test_every_family_output_format_has_a_parser(name: str) -> None:
    family = FAMILIES[name]
    assert get_output_format(family.output_format).name == family.output_format, (
        f"family {name!r} declares output_format {family.output_format!r}: add its parser to tito/parsing/registry.py"
    )


def test_an_unknown_format_names_the_known_ones() -> None:
    with pytest.raises(ConfigurationError, match="qwen3_json"):
        get_output_format("nope")


@pytest.mark.parametrize("name", list(OUTPUT_FORMATS))
def test_each_format_lists_the_think_markers_first_and_no_marker_twice(name: str) -> None:
    markers = OUTPUT_FORMATS[name].markers
    assert markers[:2] == (THINK_OPEN, THINK_CLOSE)
    assert len(set(markers)) == len(markers)


@pytest.mark.parametrize("name", [name for name in FAMILIES if name != "default"])
def test_every_marker_a_parser_looks_for_is_one_of_its_family_special_tokens(name: str) -> None:
    """Parsers find boundaries by the id of each marker, so the family must declare it atomic (`default`
    declares none: its checkpoint's tokenizer decides, and a marker it splits falls back to text)."""
    family = FAMILIES[name]
    undeclared = [m for m in get_output_format(family.output_format).markers if m not in family.special_tokens]
    assert not undeclared, f"{name}: parser {family.output_format!r} looks for {undeclared}, not in special_tokens"
