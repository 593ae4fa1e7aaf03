"""Codex CLI (`@openai/codex`, OpenAI Responses) unmodified, on its default tools, against `tito serve`:
`codex exec --json` with a custom provider (`wire_api = "responses"`) in a CODEX_HOME of its own, the scripted
engine playing the episode in Codex's own tool names (`exec_command`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.agents.harness import AGENTS, Tito, agent_env, check_episode, installed, run_agent, tito_serve
from tests.agents.report import Observation, npm_version, observe
from tests.agents.scripted_engine import Message, ScriptedSglang

pytestmark = pytest.mark.agents

CODEX = AGENTS / "node_modules" / ".bin" / "codex"
MARK = "MARKER-5821"
SECOND = "MARKER-6604"


COMPACTION_PROMPT = "You are performing a CONTEXT CHECKPOINT COMPACTION."
"""How Codex 0.171.0's own compaction request (without a remote compact endpoint) begins its last user message."""
SUMMARY = f"CODEX-COMPACTED: marker.txt holds {MARK}."


def episode(prompt: str) -> Message:
    """Codex's episodes, told apart by their task: TASK-1 and TASK-2 read a file with `exec_command`, then say
    what it holds; TASK-3 spawns a sub-agent (`spawn_agent`, in the `multi_agent_v1` namespace) whose SUBTASK
    reads the file, waits for it (`wait_agent`), then says what it found. Codex's compaction request gets a summary
    that holds what the file said, so the turn that goes on from it answers."""
    if COMPACTION_PROMPT in prompt[prompt.rfind("<|im_start|>user") :]:
        return {"reasoning_content": "I summarise.", "content": SUMMARY}
    if "TASK-3" in prompt:
        return delegate(prompt[prompt.rfind("TASK-3") :])
    task = max(("TASK-1", "TASK-2", "SUBTASK"), key=prompt.rfind)
    name, mark = ("second.txt", SECOND) if task == "TASK-2" else ("marker.txt", MARK)
    if mark in prompt[prompt.rfind(task) :]:
        return {"reasoning_content": "The file says it.", "content": f"The file holds {mark}."}
    return {"reasoning_content": "I should read the file.", "content": "", "tool_calls": [read(name)]}


def read(name: str) -> dict[str, Any]:
    return {"name": "exec_command", "arguments": {"cmd": f"cat {name}"}}


def delegate(tail: str) -> Message:
    if "spawn_agent" not in tail:
        spawn = {"name": "spawn_agent", "arguments": {"message": "SUBTASK: read marker.txt, say what it holds."}}
        return {"reasoning_content": "A sub-agent can do it.", "content": "", "tool_calls": [spawn]}
    if "wait_agent" not in tail:
        agent = json.loads(tail[tail.index('{"agent_id"') :].split("\n", 1)[0])["agent_id"]
        wait = {"name": "wait_agent", "arguments": {"targets": [agent]}}
        return {"reasoning_content": "I wait for it.", "content": "", "tool_calls": [wait]}
    assert MARK in tail, tail[-1000:]
    return {"reasoning_content": "It reported.", "content": f"The sub-agent found {MARK}."}


def codex_env(tito: Tito, session_id: str, home: Path, thinking: bool, settings: str = "") -> dict[str, str]:
    """A CODEX_HOME whose config.toml names tito as the provider (what the README says to write, nothing else
    but the switches that keep Codex off the network: analytics, the update check; and thinking off where asked),
    plus top-level `settings` lines."""
    effort = "" if thinking else 'model_reasoning_effort = "none"\n'
    config = (
        f'model = "qwen3"\nmodel_provider = "tito"\ncheck_for_update_on_startup = false\n{effort}{settings}'
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


def workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir(parents=True)
    (work / "marker.txt").write_text(MARK + "\n")
    (work / "second.txt").write_text(SECOND + "\n")
    return work


def completed(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e["item"] for e in events if e.get("type") == "item.completed" and e["item"]["type"] == kind]


@pytest.mark.parametrize(
    ("family", "thinking", "trajectory"),
    [("qwen3", True, "linear"), ("qwen3", False, "tree"), ("qwen35", True, "tree"), ("qwen35", False, "linear")],
)  # every family, thinking setting and trajectory kind, each pair of them once: the stage stays short
def test_codex_runs_a_tool_episode_that_is_one_sample(
    family: str, thinking: bool, trajectory: str, tmp_path: Path
) -> None:
    work = workdir(tmp_path)
    with ScriptedSglang(family, episode) as engine, tito_serve(engine, family, tmp_path / "tito.log") as tito:
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


@pytest.mark.parametrize("trajectory", ["linear", "tree"])
def test_a_second_user_turn_by_codex_exec_resume_continues_the_one_sample(trajectory: str, tmp_path: Path) -> None:
    work = workdir(tmp_path)
    with ScriptedSglang("qwen3", episode) as engine, tito_serve(engine, "qwen3", tmp_path / "tito.log") as tito:
        session_id = tito.new_session(trajectory=trajectory)
        env = codex_env(tito, session_id, tmp_path / "home", True)
        codex(env, work, "TASK-1: read marker.txt and tell me what it holds.")
        events = codex(env, work, "resume", "--last", "TASK-2: now read second.txt and tell me what it holds.")
        assert [m["text"] for m in completed(events, "agent_message")] == [f"The file holds {SECOND}."]
        samples = check_episode(tito, engine, session_id)
        assert len(samples) == 1 and len(engine.sampled()) == 4


@pytest.mark.parametrize("trajectory", ["linear", "tree"])
def test_codex_spawns_a_sub_agent_that_runs_and_is_its_own_labelled_sample(trajectory: str, tmp_path: Path) -> None:
    """`spawn_agent` comes back with its `namespace`, so Codex runs the sub-agent (without it Codex answers itself
    "unsupported call"); the sub-agent's requests share the base URL and are their own conversation, labelled by
    Codex's lineage headers."""
    work = workdir(tmp_path)
    with ScriptedSglang("qwen3", episode) as engine, tito_serve(engine, "qwen3", tmp_path / "tito.log") as tito:
        session_id = tito.new_session(trajectory=trajectory)
        env = codex_env(tito, session_id, tmp_path / "home", True)
        events = codex(env, work, "TASK-3: use a sub-agent to read marker.txt.")
        calls = completed(events, "collab_tool_call")
        assert [call["tool"] for call in calls] == ["spawn_agent", "wait"]
        [state] = calls[1]["agents_states"].values()
        assert state == {"status": "completed", "message": f"The file holds {MARK}."}
        assert [m["text"] for m in completed(events, "agent_message")] == [f"The sub-agent found {MARK}."]
        samples = check_episode(tito, engine, session_id)
        assert len(engine.sampled()) == 5 and len(samples) == 2  # main: spawn, wait, answer; sub-agent: call, answer
        main, sub = sorted((sample["conversation"] for sample in samples), key=lambda c: c["kind"] != "main")
        assert (main["kind"], sub["kind"], sub["parent"]) == ("main", "subagent", main["id"])


@pytest.mark.parametrize("trajectory", ["linear", "tree"])
def test_codex_auto_compaction_is_its_own_conversation_and_the_main_loop_continues_linked(
    trajectory: str, tmp_path: Path
) -> None:
    """Codex compacts on its own once a reply's reported usage (`total_tokens`) reaches
    `model_auto_compact_token_limit` and the turn goes on (a tool result to answer): against a custom provider it
    sends the history with `tools: []` and its compaction prompt, labelled `request_kind: "compaction"`, then goes on
    from the opening, the user messages and the summary. Its opening alone is ~10k tokens, so a 5,000-token limit
    compacts after the first tool call; the summary holds the answer, so the turn ends after one compaction."""
    work = workdir(tmp_path)
    with ScriptedSglang("qwen3", episode) as engine, tito_serve(engine, "qwen3", tmp_path / "tito.log") as tito:
        session_id = tito.new_session(trajectory=trajectory)
        env = codex_env(tito, session_id, tmp_path / "home", True, "model_auto_compact_token_limit = 5000\n")
        events = codex(env, work, "TASK-1: read marker.txt and tell me what it holds.")
        assert MARK in completed(events, "command_execution")[0]["aggregated_output"]
        assert [m["text"] for m in completed(events, "agent_message")] == [f"The file holds {MARK}."]
        summaries = [g for g in engine.sampled() if COMPACTION_PROMPT in g.prompt]
        assert len(summaries) == 1 and len(engine.sampled()) == 3, "the call, the summary, the answer"
        samples = check_episode(tito, engine, session_id)
        labels = [
            (c["id"], c["kind"], c["parent"], c["continues"], c["compaction"])
            for c in tito.session(session_id)["conversations"]
        ]
        assert labels == [
            ("c0", "main", None, None, None),
            ("c1", "compaction", "c0", None, None),
            ("c2", "main", None, "c0", "c1"),
        ], "the compaction is its own conversation; the one after it continues the main loop"
        assert sorted(sample["conversation"]["id"] for sample in samples) == ["c0", "c1", "c2"]


def representative(tmp_path: Path) -> Observation:
    """docs/agents.md's Codex row: TASK-1 on the defaults (qwen3, linear)."""
    work = workdir(tmp_path)
    with ScriptedSglang("qwen3", episode) as engine, tito_serve(engine, "qwen3", tmp_path / "tito.log") as tito:
        session_id = tito.new_session()
        codex(codex_env(tito, session_id, tmp_path / "home", True), work, "TASK-1: read marker.txt.")
        command = 'codex exec --json TASK (config.toml: a provider with wire_api = "responses")'
        return observe("Codex CLI", npm_version("@openai/codex"), command, tito, engine, session_id)
