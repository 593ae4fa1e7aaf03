"""Codex CLI (`@openai/codex`, OpenAI Responses) unmodified, on its default tools, against `tito serve`:
`codex exec --json` with a custom provider (`wire_api = "responses"`) in a CODEX_HOME of its own, the scripted
engine playing the episode in Codex's own tool names (`exec_command`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.agents.harness import AGENTS, Tito, agent_env, check_episode, installed, run_agent, tito_serve
from tests.agents.scripted_engine import Message, ScriptedSglang

pytestmark = pytest.mark.agents

CODEX = AGENTS / "node_modules" / ".bin" / "codex"
MARK = "MARKER-5821"


def read_the_marker(prompt: str) -> Message:
    """Task 1: read marker.txt with a command, then say what it holds."""
    if MARK in prompt[prompt.rfind("TASK-1") :]:
        return {"reasoning_content": "The file says it.", "content": f"The file holds {MARK}."}
    call = {"name": "exec_command", "arguments": {"cmd": "cat marker.txt"}}
    return {"reasoning_content": "I should read the file.", "content": "", "tool_calls": [call]}


def codex_env(tito: Tito, session_id: str, home: Path, thinking: bool) -> dict[str, str]:
    """A CODEX_HOME whose config.toml names tito as the provider (what the README says to write, nothing else
    but the switches that keep Codex off the network: analytics, the update check; and thinking off where asked)."""
    effort = "" if thinking else 'model_reasoning_effort = "none"\n'
    config = (
        f'model = "qwen3"\nmodel_provider = "tito"\ncheck_for_update_on_startup = false\n{effort}'
        "[analytics]\nenabled = false\n"
        f'[model_providers.tito]\nname = "tito"\nbase_url = "{tito.base_url(session_id)}/v1"\n'
        'wire_api = "responses"\n'
    )
    env = agent_env(home, {"CODEX_HOME": str(home / ".codex")})
    (home / ".codex").mkdir(parents=True, exist_ok=True)
    (home / ".codex" / "config.toml").write_text(config)
    return env


def codex(env: dict[str, str], work: Path, *argv: str) -> list[dict[str, Any]]:
    """`codex exec --json ...` run to its end; its JSON events."""
    done = run_agent([str(installed(CODEX)), "exec", "--json", "--skip-git-repo-check", *argv], work, env).check()
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def completed(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e["item"] for e in events if e.get("type") == "item.completed" and e["item"]["type"] == kind]


@pytest.mark.parametrize("family", ["qwen3", "qwen35"])
@pytest.mark.parametrize("thinking", [True, False], ids=["thinking", "no-thinking"])
@pytest.mark.parametrize("trajectory", ["linear", "tree"])
def test_codex_runs_a_tool_episode_that_is_one_sample(
    family: str, thinking: bool, trajectory: str, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "marker.txt").write_text(MARK + "\n")
    with ScriptedSglang(family, read_the_marker) as engine, tito_serve(engine, family, tmp_path / "tito.log") as tito:
        session_id = tito.new_session(trajectory=trajectory)
        env = codex_env(tito, session_id, tmp_path / "home", thinking)
        events = codex(env, work, "TASK-1: read marker.txt and tell me what it holds.")
        commands = completed(events, "command_execution")
        assert [c["exit_code"] for c in commands] == [0] and MARK in commands[0]["aggregated_output"]
        assert [m["text"] for m in completed(events, "agent_message")] == [f"The file holds {MARK}."]
        samples = check_episode(tito, engine, session_id)
        assert len(samples) == 1 and len(engine.sampled()) == 2
        opening = engine.sampled()[0].prompt
        assert '"name": "spawn_agent"' in opening and "web_search" not in opening  # namespace in, hosted tool out
