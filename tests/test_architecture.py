"""Imports point down: each module's docstring states its import rule, the code keeps it, and the rule keeps
docs/architecture.md's import table.

A rule is one sentence of the module docstring, in one of three spellings: `Imports nothing from tito.` (the
sentence may go on, e.g. `and nothing heavy`), `Imports nothing from tito but errors and families.base.` or
`Imports from tito: errors, families.base (the Family type).` Names are relative to `tito`; a name allows
that module and everything under it; a parenthesis after a name explains it. A package's `__init__` may
import its own modules without naming them. Imports inside functions and under TYPE_CHECKING count too.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
ARCHITECTURE = ROOT / "docs" / "architecture.md"

_NAME = r"[a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)*"
_ENTRY = _NAME + r"(?: \([^)]*\))?"
_LIST = _ENTRY + r"(?:(?:,| and|, and) " + _ENTRY + r")*"
_END = r"\.(?!\S)"  # a full stop, not the dot inside a dotted name
_NOTHING_BUT = rf"nothing from tito(?: but (?P<but>{_LIST}){_END}|(?! but\b))"
_RULE = re.compile(rf"\b[Ii]mports (?:{_NOTHING_BUT}|from tito: (?P<listed>{_LIST}){_END})")
_TABLE_ROW = re.compile(r"^\| `tito(?:\.(?P<unit>[a-z0-9_.]+))?` \| (?P<allowed>[^|]*) \|", re.MULTILINE)


@dataclass(frozen=True)
class Module:
    name: str
    """Dotted, e.g. `tito.families.base`; a package by its own name, e.g. `tito.families`."""
    path: Path
    is_package: bool

    @property
    def docstring(self) -> str:
        return ast.get_docstring(ast.parse(self.path.read_text(encoding="utf-8"))) or ""


def _modules() -> list[Module]:
    modules = []
    for path in sorted((SRC / "tito").rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        modules.append(Module(".".join(parts[:-1] if is_package else parts), path, is_package))
    return modules


MODULES = _modules()
MODULE_NAMES = {module.name for module in MODULES}


def _covers(allowed: str, imported: str) -> bool:
    return imported == allowed or imported.startswith(allowed + ".")


def imports_of(module: Module) -> set[str]:
    """The tito modules `module` imports, anywhere in its code; `from P import m` counts as P.m when m is a module."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(module.path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            package = module.name if module.is_package else module.name.rpartition(".")[0]
            base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]) if node.level else ""
            source = ".".join(part for part in (base, node.module or "") if part)
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                found.add(submodule if submodule in MODULE_NAMES else source)
    return {name for name in found if name == "tito" or name.startswith("tito.")}


def stated_rule(docstring: str) -> set[str] | None:
    """The dotted tito names a docstring allows, or None when it states no rule in a parseable spelling."""
    rules = list(_RULE.finditer(" ".join(docstring.split())))
    if len(rules) != 1:
        return None
    listed = rules[0]["but"] or rules[0]["listed"] or ""
    names = re.sub(r" \([^)]*\)", "", listed).replace(", and ", ", ").replace(" and ", ", ")
    return {f"tito.{name.strip()}" for name in names.split(",") if name.strip()}


def import_table() -> dict[str, set[str] | None]:
    """docs/architecture.md's table: unit (module or package) -> what it may import from outside itself (None: any)."""
    table: dict[str, set[str] | None] = {}
    for row in _TABLE_ROW.finditer(ARCHITECTURE.read_text(encoding="utf-8")):
        unit = "tito" + (f".{row['unit']}" if row["unit"] else "")
        cell = row["allowed"].strip()
        table[unit] = None if cell == "anything" else {f"tito.{name}" for name in re.findall(r"`([a-z0-9_.]+)`", cell)}
    return table


def unit_of(module: str, table: dict[str, set[str] | None]) -> str | None:
    """The table's most specific row for `module`; the `tito` row is the package's own `__init__` only."""
    rows = [unit for unit in table if unit == module or (unit != "tito" and _covers(unit, module))]
    return max(rows, key=len, default=None)


def _id(module: Module) -> str:
    return module.name


def undeclared_imports(module: Module) -> list[str]:
    """The tito modules `module` imports that its docstring's rule does not allow."""
    allowed = (stated_rule(module.docstring) or set()) | {module.name}  # a package's own modules need no naming
    return sorted(name for name in imports_of(module) if not any(_covers(a, name) for a in allowed))


@pytest.mark.parametrize("module", MODULES, ids=_id)
def test_every_module_states_one_import_rule(module: Module) -> None:
    assert stated_rule(module.docstring) is not None, (
        f"{module.path.relative_to(ROOT)}: the docstring needs one import rule, e.g. 'Imports from tito: errors, "
        "families.base.' or 'Imports nothing from tito.' (see tests/test_architecture.py)"
    )


@pytest.mark.parametrize("module", MODULES, ids=_id)
def test_every_module_imports_only_what_its_docstring_allows(module: Module) -> None:
    outside = undeclared_imports(module)
    assert not outside, f"{module.name} imports {outside}, which its docstring's rule does not allow"


def refused_by_table(module: Module, table: dict[str, set[str] | None]) -> list[str]:
    """What `module` imports or its rule names, from outside its table row's unit, that the row does not allow."""
    unit = unit_of(module.name, table)
    assert unit is not None, f"docs/architecture.md's import table has no row for {module.name} or a package above it"
    permitted = table[unit]
    named = (stated_rule(module.docstring) or set()) | imports_of(module)
    crossing = sorted(name for name in named if not _covers(unit, name))
    return [] if permitted is None else [name for name in crossing if not any(_covers(a, name) for a in permitted)]


@pytest.mark.parametrize("module", MODULES, ids=_id)
def test_every_module_rule_keeps_the_architecture_import_table(module: Module) -> None:
    refused = refused_by_table(module, import_table())
    assert not refused, f"{module.name} imports or names {refused}, which docs/architecture.md's table refuses"


def test_the_table_check_bites_when_a_row_is_narrowed() -> None:
    tokenizer = next(module for module in MODULES if module.name == "tito.tokenizer")
    narrowed = {**import_table(), "tito.tokenizer": {"tito.errors"}}
    assert "tito.parsing" in refused_by_table(tokenizer, narrowed)


def test_the_rule_parser_reads_each_spelling_and_rejects_prose() -> None:
    assert stated_rule("Job.\n\nImports nothing from tito.") == set()
    assert stated_rule("Job. Imports nothing from tito and nothing heavy.") == set()
    assert stated_rule("Job. Imports nothing from tito but errors,\ntrajectory.events and journal.codec.") == {
        "tito.errors", "tito.trajectory.events", "tito.journal.codec"}  # fmt: skip
    assert stated_rule("Job.\n\nImports from tito: families.base (the Family type), errors.") == {
        "tito.families.base", "tito.errors"}  # fmt: skip
    assert stated_rule("Imports tito.tokenizer and below.") is None
    assert stated_rule("Imports nothing from tito but the journal's codec.") is None
    assert stated_rule("Imports nothing from tito. Imports from tito: errors.") is None


def test_an_import_inside_a_function_that_the_rule_does_not_name_is_caught(tmp_path: Path) -> None:
    path = tmp_path / "leaky.py"
    leaky_source = (
        '"""Leaky. Imports from tito: errors."""\n\n\n'
        "def f():\n    from tito.errors import TitoError\n    from tito.server.app import create_app\n"
    )
    path.write_text(leaky_source)
    assert undeclared_imports(Module("tito.leaky", path, is_package=False)) == ["tito.server.app"]


def test_a_server_room_row_refuses_a_room_above_it(tmp_path: Path) -> None:
    """The server's rooms import down: a turn-path module that reaches for a command is refused by its room's row."""
    path = tmp_path / "leaky.py"
    path.write_text('"""Leaky. Imports from tito: server.errors."""\n\nfrom tito.server.commands.launch import x\n')
    leaky = Module("tito.server.turns.leaky", path, is_package=False)
    assert refused_by_table(leaky, import_table()) == ["tito.server.commands.launch"]
