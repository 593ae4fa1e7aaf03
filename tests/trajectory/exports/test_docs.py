"""docs/trainers.md cannot go stale: each format's section names the upstream version and type the projection
follows and every key its export writes (and the keys of the records' nested field groups)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tito.trajectory.exports import PROJECTIONS

from .rollouts import rollout

DOC = Path(__file__).resolve().parents[3] / "docs" / "trainers.md"
SECTIONS = {"verl": "verl", "skyrl": "SkyRL", "prime-rl": "prime-rl", "verifiers": "verifiers", "trl": "TRL",
            "miles": "miles", "areal": "AReaL", "nemo_gym": "NeMo Gym"}  # fmt: skip
NESTED = ("extra_fields", "episode")
"""Record fields whose own keys are trainer fields too."""


def section(heading: str) -> str:
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", DOC.read_text(), re.S | re.M)
    assert match, f"docs/trainers.md has no section `## {heading}`"
    return match.group(1)


def written_keys(exported: Any) -> set[str]:
    records = exported if isinstance(exported, list) else [exported]
    keys = {key for record in records for key in record}
    keys |= {inner for record in records for key in NESTED if key in record for inner in record[key]}
    return keys


def test_every_format_has_a_section() -> None:
    assert set(SECTIONS) == set(PROJECTIONS)


@pytest.mark.parametrize("name", sorted(PROJECTIONS))
def test_each_section_names_the_version_type_and_every_key_written(name: str) -> None:
    text = section(SECTIONS[name])
    version, upstream_type = PROJECTIONS[name].upstream.split(": ", 1)
    assert version in text, f"{name}: the section does not name {version!r}"
    assert upstream_type.split()[0].split("(")[0].strip(",") in text, f"{name}: the type {upstream_type!r}"
    missing = {key for key in written_keys(PROJECTIONS[name].export(rollout())) if f"`{key}`" not in text}
    assert not missing, f"docs/trainers.md's {SECTIONS[name]} section does not name {sorted(missing)}"
