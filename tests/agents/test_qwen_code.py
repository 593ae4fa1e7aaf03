"""Qwen Code (`@qwen-code/qwen-code`, chat completions) unmodified, on its default tools, against `tito serve`:
`qwen -p TASK --yolo --output-format json` with OPENAI_BASE_URL / OPENAI_MODEL, the scripted engine playing the
episode in Qwen Code's own tool names (`run_shell_command`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.agents.harness import AGENTS, Tito, agent_env, check_episode, installed, run_agent, tito_serve
from tests.agents.report import Observation, npm_version, observe
from tests.agents.scripted_engine import Message, ScriptedSglang

pytestmark = pytest.mark.agents

QWEN = AGENTS / "node_modules" / ".bin" / "qwen"
MARK = "MARKER-9163"
SETTINGS = {"privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
            "general": {"enableAutoUpdate": False}}  # fmt: skip
"""Qwen Code's own switches for usage statistics, telemetry and updates (its ~/.qwen/settings.json)."""


def episode(prompt: str) -> Message:
    """Task 1 runs `cat marker.txt` with `run_shell_command`, then says what it holds."""
    if MARK in prompt[prompt.rfind("TASK-1") :]:
        return {"reasoning_content": "The file says it.", "content": f"The file holds {MARK}."}
    call = {"name": "run_shell_command", "arguments": {"command": "cat marker.txt", "description": "Read the file"}}
    return {"reasoning_content": "I should read the file.", "content": "", "tool_calls": [call]}


@pytest.mark.parametrize(("family", "trajectory"), [("qwen3", "linear"), ("qwen35", "tree")])
def test_qwen_code_runs_a_tool_episode_that_is_one_sample(family: str, trajectory: str, tmp_path: Path) -> None:
    with ScriptedSglang(family, episode) as engine, tito_serve(engine, family, tmp_path / "tito.log") as tito:
        session_id = tito.new_session(trajectory=trajectory)
        run_qwen(tito, session_id, tmp_path)
        samples = check_episode(tito, engine, session_id)
        assert len(samples) == 1 and len(engine.sampled()) == 2


def run_qwen(tito: Tito, session_id: str, tmp_path: Path) -> None:
    """`qwen -p TASK-1 --yolo --output-format json` pointed at the session; checks its result and its tool run."""
    work = tmp_path / "work"
    work.mkdir(parents=True)
    (work / "marker.txt").write_text(MARK + "\n")
    home = tmp_path / "home"
    (home / ".qwen").mkdir(parents=True)
    (home / ".qwen" / "settings.json").write_text(json.dumps(SETTINGS))
    openai = {"OPENAI_BASE_URL": f"{tito.base_url(session_id)}/v1", "OPENAI_API_KEY": "unused", "OPENAI_MODEL": "qwen3"}
    task = "TASK-1: read marker.txt and tell me what it holds."
    command = [str(installed(QWEN)), "-p", task, "--yolo", "--output-format", "json"]
    result = run_agent(command, work, agent_env(home, openai)).check().output_json()[-1]
    assert result["type"] == "result" and result["result"] == f"The file holds {MARK}.", result
    tools = result["stats"]["tools"]
    assert (tools["totalCalls"], tools["totalSuccess"]) == (1, 1)


def representative(tmp_path: Path) -> Observation:
    """docs/agents.md's Qwen Code row: TASK-1 on the defaults (qwen3, linear)."""
    with ScriptedSglang("qwen3", episode) as engine, tito_serve(engine, "qwen3", tmp_path / "tito.log") as tito:
        session_id = tito.new_session()
        run_qwen(tito, session_id, tmp_path)
        command = "qwen -p TASK --yolo --output-format json (OPENAI_BASE_URL, OPENAI_MODEL)"
        return observe("Qwen Code", npm_version("@qwen-code/qwen-code"), command, tito, engine, session_id)
