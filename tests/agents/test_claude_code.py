"""Claude Code, unmodified and on its default settings (its default model, adaptive thinking, streaming), run
headless (`claude -p`) against a tito session with the scripted engine: the episode trains whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agents.claude import (
    AGENT_ANSWER,
    AGENT_TASK,
    ANSWER,
    CLAUDE_CODE_VERSION,
    SECOND_ANSWER,
    SECOND_TASK,
    TASK,
    agent_episode,
    bash_episode,
    claude,
    claude_env,
)
from tests.agents.harness import agent_env, check_episode, run_agent, tito_serve
from tests.agents.report import Observation, observe
from tests.agents.scripted_engine import ScriptedSglang

pytestmark = pytest.mark.agents

RUNS = [("qwen3", True, "linear"), ("qwen3", False, "tree"), ("glm47", True, "tree"), ("glm47", False, "linear")]


def test_the_pinned_version_is_installed() -> None:
    done = run_agent([str(claude()), "--version"], Path.cwd(), {"HOME": "/nonexistent"})
    assert done.stdout.startswith(CLAUDE_CODE_VERSION), done.stdout


HEADLESS = "claude -p TASK --output-format json --allowedTools Bash (ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY)"


def representative(tmp_path: Path) -> Observation:
    """docs/agents.md's Claude Code row: the Bash episode headless on its defaults (qwen3, linear)."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    with ScriptedSglang("qwen3", bash_episode) as engine, tito_serve(engine, "qwen3", tmp_path / "tito.log") as tito:
        session_id = tito.new_session()
        env = agent_env(tmp_path / "home", claude_env(tito.base_url(session_id), thinking=True))
        run_agent(
            [str(claude()), "-p", TASK, "--output-format", "json", "--allowedTools", "Bash"], workdir, env
        ).check()
        return observe("Claude Code", CLAUDE_CODE_VERSION, HEADLESS, tito, engine, session_id)


@pytest.mark.parametrize(("family", "thinking", "trajectory"), RUNS)
def test_a_headless_tool_episode_is_one_sample_with_every_id_trained(
    tmp_path: Path, workdir: Path, family: str, thinking: bool, trajectory: str
) -> None:
    with (
        ScriptedSglang(family, bash_episode) as engine,
        tito_serve(engine, family, tmp_path / "tito.log", "--trajectory", trajectory) as tito,
    ):
        session_id = tito.new_session()
        env = agent_env(tmp_path / "home", claude_env(tito.base_url(session_id), thinking))
        command = [str(claude()), "-p", TASK, "--output-format", "json", "--allowedTools", "Bash"]
        result = run_agent(command, workdir, env).check().output_json()
        assert (workdir / "out.txt").read_text() == "tito", "Claude Code's Bash tool ran in its working directory"
        assert result["result"] == ANSWER and result["is_error"] is False, result
        samples = check_episode(tito, engine, session_id)
        assert len(samples) == 1, "the main conversation is one sample"
        assert len(engine.sampled()) == 2  # the tool call and the answer: no side request in a headless run


def test_a_second_user_turn_with_continue_extends_the_same_sample(tmp_path: Path, workdir: Path) -> None:
    with (
        ScriptedSglang("qwen3", bash_episode) as engine,
        tito_serve(engine, "qwen3", tmp_path / "tito.log") as tito,
    ):
        session_id = tito.new_session()
        env = agent_env(tmp_path / "home", claude_env(tito.base_url(session_id), thinking=True))
        first = [str(claude()), "-p", TASK, "--output-format", "json", "--allowedTools", "Bash"]
        run_agent(first, workdir, env).check()
        second = [str(claude()), "-p", "--continue", SECOND_TASK, "--output-format", "json", "--allowedTools", "Bash"]
        result = run_agent(second, workdir, env).check().output_json()
        assert result["result"] == SECOND_ANSWER, result
        assert (workdir / "out.txt").read_text() == "tito again"
        assert len(engine.sampled()) == 4
        assert len(check_episode(tito, engine, session_id)) == 1, "both user turns are one conversation, one sample"


def test_with_non_essential_traffic_allowed_the_probe_and_the_episode_succeed(tmp_path: Path, workdir: Path) -> None:
    """Allowed side traffic, headless Claude Code first probes `HEAD {base}/api/hello` (tito answers 200); it sends
    its title request only when interactive (test_interactive.py)."""
    with (
        ScriptedSglang("qwen3", bash_episode) as engine,
        tito_serve(engine, "qwen3", tmp_path / "tito.log") as tito,
    ):
        session_id = tito.new_session()
        env = agent_env(tmp_path / "home", claude_env(tito.base_url(session_id), thinking=True, side_requests=True))
        command = [str(claude()), "-p", TASK, "--output-format", "json", "--allowedTools", "Bash"]
        result = run_agent(command, workdir, env).check().output_json()
        assert result["result"] == ANSWER, result
        assert (workdir / "out.txt").read_text() == "tito"
        assert len(check_episode(tito, engine, session_id)) == 1
        assert any(line["method"] == "HEAD" for line in tito.access_log())


@pytest.mark.parametrize("trajectory", ["linear", "tree"])
def test_a_sub_agent_is_its_own_labelled_sample_and_every_id_of_both_is_trained(
    tmp_path: Path, workdir: Path, trajectory: str
) -> None:
    """Claude Code's `Agent` tool runs a sub-agent: its own conversation to the same base URL."""
    with (
        ScriptedSglang("qwen3", agent_episode) as engine,
        tito_serve(engine, "qwen3", tmp_path / "tito.log", "--trajectory", trajectory) as tito,
    ):
        session_id = tito.new_session()
        env = agent_env(tmp_path / "home", claude_env(tito.base_url(session_id), thinking=True))
        command = [str(claude()), "-p", AGENT_TASK, "--output-format", "json", "--allowedTools", "Bash,Agent"]
        result = run_agent(command, workdir, env).check().output_json()
        assert result["result"] == AGENT_ANSWER, result
        assert (workdir / "sub.txt").read_text() == "sub", "the sub-agent's Bash ran in the agent's directory"
        assert len(engine.sampled()) == 4  # main: Agent call, answer; sub-agent: Bash call, answer
        samples = check_episode(tito, engine, session_id)
        assert len(samples) == 2, "the main conversation and the sub-agent's, one sample each"
        main, sub = sorted((sample["conversation"] for sample in samples), key=lambda c: c["kind"] != "main")
        assert (main["kind"], sub["kind"], sub["parent"]) == ("main", "subagent", main["id"]), samples


@pytest.mark.parametrize("trajectory", ["linear", "tree"])
def test_compaction_then_a_second_turn_loses_nothing(tmp_path: Path, workdir: Path, trajectory: str) -> None:
    """`/compact` (what auto-compaction sends too): a request that resends the conversation and asks for a summary,
    then the conversation goes on from the summary's `<summary>` block alone: the main loop's continuation."""
    with (
        ScriptedSglang("qwen3", bash_episode) as engine,
        tito_serve(engine, "qwen3", tmp_path / "tito.log", "--trajectory", trajectory) as tito,
    ):
        session_id = tito.new_session()
        env = agent_env(tmp_path / "home", claude_env(tito.base_url(session_id), thinking=True))
        flags = ["--output-format", "json", "--allowedTools", "Bash"]
        run_agent([str(claude()), "-p", TASK, *flags], workdir, env).check()
        run_agent([str(claude()), "-p", "--continue", "/compact", *flags], workdir, env).check()
        result = run_agent([str(claude()), "-p", "--continue", SECOND_TASK, *flags], workdir, env).check().output_json()
        assert result["result"] == SECOND_ANSWER, result
        assert (workdir / "out.txt").read_text() == "tito again"
        summaries = [g for g in engine.sampled() if "tito-compacted" in engine.tokenizer.decode(g.output_ids)]
        assert len(summaries) == 1 and len(engine.sampled()) == 5
        continued = [g for g in engine.sampled() if "tito-compacted" in g.prompt]
        assert len(continued) == 2, "the second turn goes on from the summary"
        samples = check_episode(tito, engine, session_id)
        assert len(samples) == 3, "the episode before compaction, the summary, the episode after it"
        conversations = [sample["conversation"] for sample in samples]
        labels = [(c["id"], c["kind"], c["parent"], c["continues"], c["compaction"]) for c in conversations]
        assert labels == [
            ("c0", "main", None, None, None),
            ("c1", "compaction", "c0", None, None),
            ("c2", "main", None, "c0", "c1"),
        ], "the summary's conversation is the main loop's continuation, linked to the one it replaces"
        assert len(tito.samples(session_id, conversation_kinds=["main"])) == 2
