"""Interactive Claude Code driven under tmux, as a person types: with non-essential traffic allowed (its default) it
sends a title request with every prompt (no tools, structured output), in the same moment as the episode's own
turn, to the same session."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agents.claude import (
    ANSWER,
    SECOND_ANSWER,
    SECOND_TASK,
    TASK,
    bash_episode,
    claude,
    claude_env,
    interactive_home,
)
from tests.agents.harness import Tmux, agent_env, check_episode, tito_serve
from tests.agents.scripted_engine import ScriptedSglang

pytestmark = pytest.mark.agents


@pytest.mark.parametrize("trajectory", ["linear", "tree"])
def test_two_prompts_with_their_title_requests_lose_nothing(tmp_path: Path, workdir: Path, trajectory: str) -> None:
    with (
        ScriptedSglang("qwen3", bash_episode) as engine,
        tito_serve(engine, "qwen3", tmp_path / "tito.log", "--trajectory", trajectory) as tito,
    ):
        session_id = tito.new_session()
        home = tmp_path / "home"
        interactive_home(home, workdir)
        env = agent_env(
            home, {**claude_env(tito.base_url(session_id), thinking=True, side_requests=True), "TERM": "xterm-256color"}
        )
        agent = Tmux(tmp_path, [str(claude()), "--allowedTools", "Bash"], workdir, env)
        try:
            agent.wait_for("❯")
            agent.type(TASK)
            agent.wait_for(ANSWER)
            agent.type(SECOND_TASK)
            screen = agent.wait_for(SECOND_ANSWER)
        finally:
            agent.close()
        assert "API Error" not in screen, screen
        assert (workdir / "out.txt").read_text() == "tito again", "the Bash tool ran in the agent's directory"
        titles = [generation for generation in engine.sampled() if '"name": "Bash"' not in generation.prompt]
        assert titles, "interactive Claude Code asks for a title"
        assert all(title.json_schema and "title" in title.json_schema for title in titles), "as structured output"
        assert len(engine.sampled()) == 4 + len(titles)
        samples = check_episode(tito, engine, session_id)
        assert len(samples) == 1 + len(titles), "the main conversation is one sample, each title its own"
        kinds = sorted(sample["conversation"]["kind"] for sample in samples)
        assert kinds == ["main"] + ["side"] * len(titles), kinds
