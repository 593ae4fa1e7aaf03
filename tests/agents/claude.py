"""Claude Code (the pinned `@anthropic-ai/claude-code` native binary) and its scripted episode: the model writes a
file with Claude Code's own `Bash` tool, reads the result, and answers; side requests (a title) get JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.agents.harness import AGENTS, installed

CLAUDE_CODE_VERSION = "2.1.332"
CLAUDE_AGENT_SDK_VERSION = "0.2.189"
CLAUDE = AGENTS / "claude" / "node_modules" / "@anthropic-ai" / "claude-code-linux-x64" / "claude"

TASK = "Write the word tito into the file out.txt with the Bash tool, then say what you did. [tito-task-1]"
SECOND_TASK = "Now append the word again to out.txt with the Bash tool. [tito-task-2]"
ANSWER = "I wrote tito into out.txt."
SECOND_ANSWER = "I appended again to out.txt."
STEPS = [
    # (the task's marker, the Bash command, what only its output says, the answer once it ran)
    ("[tito-task-1]", "printf tito > out.txt && echo tito-step-$((0+1))-ran", "tito-step-1-ran", ANSWER),
    ("[tito-task-2]", "printf ' again' >> out.txt && echo tito-step-$((1+1))-ran", "tito-step-2-ran", SECOND_ANSWER),
]
"""Each command's output (not its command line) names its step: a prompt holds the marker only once it really ran."""
API_KEY = "sk-tito-test"
COMPACTED = "<analysis>One file written.</analysis>\n<summary>tito-compacted: out.txt holds tito.</summary>"
TITLE = '{"title": "Write tito into out.txt"}'


def claude() -> Path:
    return installed(CLAUDE)


def interactive_home(home: Path, workdir: Path) -> None:
    """Claude Code's own first-run state in a fresh HOME, as after its onboarding: onboarding done (else it checks
    api.anthropic.com and exits), the test key approved, `workdir` trusted."""
    home.mkdir(parents=True, exist_ok=True)
    state = {
        "hasCompletedOnboarding": True,
        "theme": "dark",
        "customApiKeyResponses": {"approved": [API_KEY], "rejected": []},
        "projects": {str(workdir): {"hasTrustDialogAccepted": True, "allowedTools": []}},
    }
    (home / ".claude.json").write_text(json.dumps(state))


def claude_env(base_url: str, thinking: bool, side_requests: bool = False) -> dict[str, str]:
    """Claude Code's own switches for a tito session: its base URL and any key (defaults otherwise);
    `side_requests` lets it send non-essential traffic (its title request)."""
    env = {"ANTHROPIC_BASE_URL": base_url, "ANTHROPIC_API_KEY": API_KEY}
    if not thinking:
        env["MAX_THINKING_TOKENS"] = "0"
    if side_requests:
        env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = ""
    return env


def bash_episode(prompt: str) -> dict[str, Any]:
    """The policy: per task, Bash once, then the answer; a request without Claude Code's tools (a title) gets
    JSON. The latest task the prompt holds decides."""
    if '"name": "Bash"' not in prompt:
        return {"content": TITLE}
    if "Do NOT call any tools" in prompt[-2000:]:  # Claude Code's compaction request (`/compact`, auto-compaction)
        return {"content": COMPACTED, "reasoning_content": "I summarise."}
    for marker, command, ran, answer in reversed(STEPS):
        if ran in prompt:
            return {"content": answer, "reasoning_content": "The command ran."}
        if marker in prompt:
            call = {"name": "Bash", "arguments": {"command": command, "description": "Change out.txt"}}
            return {"content": "", "reasoning_content": "I run the command.", "tool_calls": [call]}
    return {"content": "Nothing to do."}


AGENT_TASK = "Have a sub-agent write the word sub into sub.txt, then report. [tito-task-agent]"
SUB_TASK = "Write the word sub into the file sub.txt with the Bash tool. [tito-sub-task]"
SUB_COMMAND = "printf sub > sub.txt && echo tito-sub-step-$((0+1))-ran"
SUB_ANSWER = "Wrote sub.txt: tito-subagent-finished"
AGENT_ANSWER = "The sub-agent wrote sub.txt."


def agent_episode(prompt: str) -> dict[str, Any]:
    """The policy of an episode with a sub-agent: the main loop calls Claude Code's `Agent` tool, the sub-agent (its
    own conversation, which never holds the main task) runs Bash and answers, then the main loop answers."""
    if '"name": "Bash"' not in prompt:
        return {"content": TITLE}
    if "[tito-task-agent]" in prompt:
        if "tito-subagent-finished" in prompt:
            return {"content": AGENT_ANSWER, "reasoning_content": "The sub-agent is done."}
        if '"name": "Agent", "arguments"' in prompt:  # launched in the background after all: wait for its report
            return {"content": "Waiting for the sub-agent.", "reasoning_content": "It runs."}
        arguments = {
            "description": "Write sub.txt",
            "prompt": SUB_TASK,
            "subagent_type": "general-purpose",
            "run_in_background": False,
        }
        call = {"name": "Agent", "arguments": arguments}
        return {"content": "", "reasoning_content": "A sub-agent does it.", "tool_calls": [call]}
    if "[tito-sub-task]" in prompt:
        if "tito-sub-step-1-ran" in prompt:
            return {"content": SUB_ANSWER, "reasoning_content": "Done."}
        call = {"name": "Bash", "arguments": {"command": SUB_COMMAND, "description": "Write sub.txt"}}
        return {"content": "", "reasoning_content": "I run it.", "tool_calls": [call]}
    return {"content": "Nothing to do."}
