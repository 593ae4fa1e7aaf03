"""examples/agent_loop.py runs as a newcomer would run it, and its per-turn check bites."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tito import get_tito_tokenizer
from tito.tokenizer_loading import LocalTokenizer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "agent_loop.py"


@pytest.fixture(scope="module")
def agent_loop() -> ModuleType:
    spec = importlib.util.spec_from_file_location("agent_loop_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_runs_from_the_command_line_and_reports_every_turn() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--family", "qwen3"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "turn 4:" in done.stdout and "qwen3: 5 turns token-exact" in done.stdout


@pytest.mark.parametrize("family", ["qwen3", "qwennext", "qwen35", "deepseekv4"])
def test_every_turn_is_token_exact_and_the_tools_run(
    agent_loop: ModuleType, family: str, capsys: pytest.CaptureFixture[str]
) -> None:
    stored_ids = agent_loop.agent_loop(family)
    out = capsys.readouterr().out
    assert "stop: 6 * 7 + 8 = 50." in out and "stop: Twice that is 100." in out
    assert out.count("tool_calls: ") == 3 and len(stored_ids) > 400


def test_the_per_turn_check_fails_when_a_stored_id_is_changed(
    agent_loop: ModuleType, qwen3_tokenizer: LocalTokenizer
) -> None:
    tt = get_tito_tokenizer(qwen3_tokenizer, "qwen3")
    messages = [{"role": "user", "content": "Hi"}]
    prompt_ids = tt.merge_tokens([], messages, [], tools=agent_loop.TOOLS)
    agent_loop.check_turn(tt, prompt_ids, [], messages)
    with pytest.raises(AssertionError, match="stored ids were changed"):
        agent_loop.check_turn(tt, prompt_ids, [prompt_ids[0] + 1], messages)
    with pytest.raises(AssertionError, match="differ from the tokenizer's ids"):
        agent_loop.check_turn(tt, [*prompt_ids, 198], [], messages)
