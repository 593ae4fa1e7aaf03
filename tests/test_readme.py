"""The README's Python snippet runs as written and does what it says: the second prompt extends the first."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_snippet_runs_and_its_second_prompt_keeps_the_stored_ids() -> None:
    snippets = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert len(snippets) == 1, "the README holds one Python snippet; this test runs it"
    scope: dict[str, Any] = {}
    exec(snippets[0], scope)
    assert scope["result"].message["content"] == "42"
    stored_ids, prompt_ids = scope["stored_ids"], scope["prompt_ids"]
    assert prompt_ids[: len(stored_ids)] == stored_ids


def _serve_synopsis() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("- `tito serve [")
    return text[start : text.index("`:", start)]


def test_the_readme_lists_every_tito_serve_flag_once_in_its_synopsis() -> None:
    from tito.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    serve = commands.choices["serve"]
    flags = {a.option_strings[0] for a in serve._actions if a.option_strings and a.option_strings[0] != "-h"}
    listed = re.findall(r"\[(--[a-z-]+)", _serve_synopsis())
    assert sorted(listed) == sorted(flags), "README's tito serve synopsis vs the parser"
    assert len(listed) == len(set(listed))


def test_the_readme_lists_the_samples_body_fields_and_journal_inspect_once() -> None:
    from tito.server.models import SamplesRequest

    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Samples for trainers") :]
    body = section[: section.index("Every sample carries")]
    assert [field for field in SamplesRequest.model_fields if f"`{field}`" not in body] == []
    assert text.count("`tito journal inspect DIR") == 1


def test_ci_installs_the_readmes_cpu_torch_pin_first_and_then_refuses_cuda_packages() -> None:
    text = README.read_text(encoding="utf-8")
    torch_line = next(line for line in text.splitlines() if line.startswith("pip install torch=="))
    assert "--index-url https://download.pytorch.org/whl/cpu" in torch_line
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8")
    pin = torch_line.removeprefix("pip install ").split()[0]
    install = ci.index(f"python -m pip install -q {pin}\n")  # CI reaches only the registries: same pin, no index
    assert install < ci.index('pip install -q -e ".[test') < ci.index("\nno_cuda_packages\n")
