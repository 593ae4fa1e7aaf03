"""The `default` family: any checkpoint's own chat template, with the roles it proves append-only.

Its template, roles and junction are not declared but found: tito.families.probe runs the template
on fixed probe conversations when a TitoTokenizer is built and keeps only what passed.

Imports from tito: families.base.
"""

from __future__ import annotations

from tito.families.base import VALID_APPEND_ROLES, Family, FixedTemplate, Junction, RenderContext

DEFAULT = Family(
    name="default",
    summary="any other checkpoint: its own chat template, append roles probed at construction",
    fixed_template=FixedTemplate(None, {}, VALID_APPEND_ROLES),
    junction=Junction.PLAIN,
    end_of_turn="",
    stop_tokens=(),
    assistant_opener="",
    output_format="plain",
    context=RenderContext.FULL_HISTORY,
    probed=True,
)
