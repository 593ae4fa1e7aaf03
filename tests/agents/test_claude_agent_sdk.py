"""The Claude Agent SDK (pinned, from PyPI, with the Claude Code it bundles), `query` on its defaults against a tito
session with the scripted engine: the tool episode trains whole."""

from __future__ import annotations

import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from tests.agents.claude import ANSWER, CLAUDE_AGENT_SDK_VERSION, TASK, bash_episode, claude_env
from tests.agents.harness import agent_env, check_episode, run_agent, tito_serve
from tests.agents.report import Observation, observe
from tests.agents.scripted_engine import ScriptedSglang

pytestmark = pytest.mark.agents
QUERY = Path(__file__).with_name("sdk_query.py")


def test_the_pinned_version_is_installed() -> None:
    assert version("claude-agent-sdk") == CLAUDE_AGENT_SDK_VERSION, "run `bash scripts/install_agents.sh`"


def representative(tmp_path: Path) -> Observation:
    """docs/agents.md's Claude Agent SDK row: `query` with the Bash tool allowed, its defaults (qwen3, linear)."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    with ScriptedSglang("qwen3", bash_episode) as engine, tito_serve(engine, "qwen3", tmp_path / "tito.log") as tito:
        session_id = tito.new_session()
        env = agent_env(tmp_path / "home", claude_env(tito.base_url(session_id), thinking=True))
        run_agent([sys.executable, str(QUERY), TASK], workdir, env).check()
        command = "query(TASK, ClaudeAgentOptions(allowed_tools=['Bash'])) (ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY)"
        return observe("Claude Agent SDK", CLAUDE_AGENT_SDK_VERSION, command, tito, engine, session_id)


@pytest.mark.parametrize(("family", "thinking", "trajectory"), [("qwen3", True, "linear"), ("glm47", False, "tree")])
def test_a_query_tool_episode_is_one_sample_with_every_id_trained(
    tmp_path: Path, workdir: Path, family: str, thinking: bool, trajectory: str
) -> None:
    with (
        ScriptedSglang(family, bash_episode) as engine,
        tito_serve(engine, family, tmp_path / "tito.log", "--trajectory", trajectory) as tito,
    ):
        session_id = tito.new_session()
        env = agent_env(tmp_path / "home", claude_env(tito.base_url(session_id), thinking))
        result = run_agent([sys.executable, str(QUERY), TASK], workdir, env).check().output_json()
        assert (workdir / "out.txt").read_text() == "tito", "the SDK's Bash tool ran in its working directory"
        assert result["result"] == ANSWER and result["is_error"] is False, result
        assert len(check_episode(tito, engine, session_id)) == 1, "the main conversation is one sample"
        assert len(engine.sampled()) == 2
