"""The README's Python snippet runs as written and does what it says: the second prompt extends the first."""

from __future__ import annotations

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
