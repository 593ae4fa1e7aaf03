"""Trainer formats: each a small, pure projection of tito's one `Sample`, and its way back.

A projection has a name (the `format` of `POST /sessions/{id}/samples` and `tito journal export --format`), the
upstream type and version it follows, `export(samples) -> JSON` and `restore(JSON) -> samples`, with
`restore(export(samples)) == samples`. Per-record formats export a list (verl, verifiers, miles, areal, nemo_gym);
prime-rl exports its samples beside their rewards; columnar ones (SkyRL's GeneratorOutput, TRL's rollout_func
result) export one object of columns. tito's own facts (`codec.sample_facts`) ride where the trainer passes extras
through untouched: each module says where.

Imports nothing from tito but errors, trajectory.codec, trajectory.exports and trajectory.samples.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tito.errors import TitoError
from tito.trajectory.exports import areal, miles, nemo_gym, prime_rl, skyrl, trl, verifiers, verl
from tito.trajectory.samples import Sample


class UnknownFormatError(TitoError):
    """A samples format tito does not write; names the ones it does."""

    http_status = 400


@dataclass(frozen=True)
class Projection:
    name: str
    upstream: str
    """The upstream type and version the projection follows."""
    export: Callable[[Sequence[Sample]], Any]
    restore: Callable[[Any], list[Sample]]


PROJECTIONS: dict[str, Projection] = {
    module.NAME: Projection(module.NAME, module.UPSTREAM, module.export, module.restore)
    for module in (verl, skyrl, prime_rl, verifiers, trl, miles, areal, nemo_gym)
}
"""Every trainer format by name."""


def projection(name: str, also: Sequence[str] = ()) -> Projection:
    """The projection called `name`; UnknownFormatError (400) listing `also` (the caller's own formats) and ours."""
    try:
        return PROJECTIONS[name]
    except KeyError:
        choices = ", ".join([*also, *PROJECTIONS])
        raise UnknownFormatError(f"format {name!r} is not one tito writes; choose one of: {choices}") from None
