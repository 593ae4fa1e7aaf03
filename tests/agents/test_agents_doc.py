"""docs/agents.md is what the agents do: each agent's representative run (tests/agents/report.py) is run again
here and the table must equal the published one. `TITO_WRITE_DOCS=1 python -m pytest -m agents
tests/agents/test_agents_doc.py` rewrites it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.agents import test_claude_agent_sdk, test_claude_code, test_codex, test_opencode, test_qwen_code
from tests.agents.report import DOCS, TABLE_END, TABLE_START, table

pytestmark = pytest.mark.agents


def test_docs_agents_md_is_what_the_agents_do(tmp_path: Path) -> None:
    observations = []
    for module in (test_claude_code, test_claude_agent_sdk, test_codex, test_qwen_code, test_opencode):
        folder = tmp_path / module.__name__.rsplit(".", 1)[1]
        folder.mkdir()
        observations.append(module.representative(folder))
    text = DOCS.read_text()
    start, end = text.index(TABLE_START) + len(TABLE_START), text.index(TABLE_END)
    generated = "\n" + table(observations) + "\n"
    if os.environ.get("TITO_WRITE_DOCS"):
        DOCS.write_text(text[:start] + generated + text[end:])
        text = DOCS.read_text()
        start, end = text.index(TABLE_START) + len(TABLE_START), text.index(TABLE_END)
    rewrite = "TITO_WRITE_DOCS=1 python -m pytest -m agents tests/agents/test_agents_doc.py"
    assert text[start:end] == generated, f"docs/agents.md is stale; rewrite it: {rewrite}"
