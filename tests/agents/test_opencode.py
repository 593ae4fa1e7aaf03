"""opencode (`opencode-ai`, chat completions through `@ai-sdk/openai-compatible`) unmodified, on its default agent
and tools, against `tito serve`: `opencode run` with a provider in the project's opencode.json, the scripted engine
playing the episode in opencode's own tool names (`bash`); opencode sends its title request to the same base URL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.agents.harness import AGENTS, Tito, agent_env, check_episode, installed, run_agent, tito_serve
from tests.agents.report import Observation, npm_version, observe
from tests.agents.scripted_engine import Message, ScriptedSglang

pytestmark = pytest.mark.agents

OPENCODE = AGENTS / "node_modules" / ".bin" / "opencode"
MARK = "MARKER-7340"
TITLE = "Reading the marker file"
NO_NETWORK = {
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
}
"""opencode's own switches for what it would fetch: updates, the models.dev catalogue, sharing, LSP servers,
plugins."""


def episode(prompt: str) -> Message:
    """The title request gets a title; task 1 runs `cat marker.txt` with `bash`, then says what it holds."""
    if "title generator" in prompt:
        return {"content": TITLE}
    if MARK in prompt[prompt.rfind("TASK-1") :]:
        return {"reasoning_content": "The file says it.", "content": f"The file holds {MARK}."}
    call = {"name": "bash", "arguments": {"command": "cat marker.txt", "description": "Read the marker file"}}
    return {"reasoning_content": "I should read the file.", "content": "", "tool_calls": [call]}


def opencode_project(tito: Tito, session_id: str, work: Path) -> None:
    """The provider in the project's opencode.json: what a user writes to point opencode at tito."""
    provider = {
        "npm": "@ai-sdk/openai-compatible",
        "name": "tito",
        "options": {"baseURL": f"{tito.base_url(session_id)}/v1", "apiKey": "unused"},
        "models": {"qwen3": {"name": "qwen3"}},
    }
    config = {"$schema": "https://opencode.ai/config.json", "provider": {"tito": provider}, "model": "tito/qwen3"}
    (work / "opencode.json").write_text(json.dumps(config, indent=2))


@pytest.mark.parametrize(("family", "trajectory"), [("qwen3", "linear"), ("qwen35", "tree")])
def test_opencode_runs_a_tool_episode_and_its_title_request(family: str, trajectory: str, tmp_path: Path) -> None:
    with ScriptedSglang(family, episode) as engine, tito_serve(engine, family, tmp_path / "tito.log") as tito:
        session_id = tito.new_session(trajectory=trajectory)
        run_opencode(tito, session_id, tmp_path)
        samples = check_episode(tito, engine, session_id)
        assert len(engine.sampled()) == 3  # the title, the call, the answer
        kinds = sorted((sample["conversation"]["kind"], sample["response_length"] > 0) for sample in samples)
        assert kinds == [("main", True), ("side", True)]  # the main loop and the title: each its own sample
        main = tito.samples(session_id, conversation_kinds=["main"])
        assert len(main) == 1 and main[0]["conversation"]["kind"] == "main"


def run_opencode(tito: Tito, session_id: str, tmp_path: Path) -> None:
    """`opencode run TASK-1` in a project whose opencode.json points at the session; checks its answer."""
    work = tmp_path / "work"
    work.mkdir(parents=True)
    (work / "marker.txt").write_text(MARK + "\n")
    opencode_project(tito, session_id, work)
    home = tmp_path / "home"
    dirs = {"XDG_CACHE_HOME": ".cache", "XDG_DATA_HOME": ".local/share", "XDG_STATE_HOME": ".local/state"}
    env = agent_env(home, {**NO_NETWORK, **{name: str(home / path) for name, path in dirs.items()}})
    task = "TASK-1: read marker.txt and tell me what it holds."
    done = run_agent([str(installed(OPENCODE)), "run", task], work, env).check()
    assert f"The file holds {MARK}." in done.stdout


def representative(tmp_path: Path) -> Observation:
    """docs/agents.md's opencode row: TASK-1 on the defaults (qwen3, linear)."""
    with ScriptedSglang("qwen3", episode) as engine, tito_serve(engine, "qwen3", tmp_path / "tito.log") as tito:
        session_id = tito.new_session()
        run_opencode(tito, session_id, tmp_path)
        command = "opencode run TASK (opencode.json: an @ai-sdk/openai-compatible provider)"
        return observe("opencode", npm_version("opencode-ai"), command, tito, engine, session_id)
