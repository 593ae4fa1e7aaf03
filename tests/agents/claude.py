"""Claude Code (the pinned `@anthropic-ai/claude-code` native binary) and its scripted episode: the model writes a
file with Claude Code's own `Bash` tool, reads the result, and answers; side requests (a title) get JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.agents.harness import AGENTS, installed

CLAUDE_CODE_VERSION = "2.1.332"
CLAUDE_AGENT_SDK_VERSION = "0.2.189"
CLAUDE = AGENTS / "claude" / "node_modules" / "@anthropic-ai" / "claude-code-linux-x64" / "claude"

TASK = "Write the word tito into the file out.txt with the Bash tool, then say what you did. [tito-task]"
STEP_DONE = "tito-step-1-ran"
COMMAND = "printf tito > out.txt && echo tito-step-$((0+1))-ran"
"""The tool's output (not its command line) names the step: the prompt holds `STEP_DONE` only once it really ran."""
ANSWER = "I wrote tito into out.txt."


def claude() -> Path:
    return installed(CLAUDE)


def claude_env(base_url: str, thinking: bool) -> dict[str, str]:
    """Claude Code's own switches for a tito session: its base URL and any key (defaults otherwise)."""
    env = {"ANTHROPIC_BASE_URL": base_url, "ANTHROPIC_API_KEY": "sk-tito-test"}
    if not thinking:
        env["MAX_THINKING_TOKENS"] = "0"
    return env


def bash_episode(prompt: str) -> dict[str, Any]:
    """The policy: Bash once, then the answer; a request without Claude Code's tools (a title) gets JSON."""
    if '"name": "Bash"' not in prompt:
        return {"content": '{"title": "Write tito into out.txt"}'}
    if STEP_DONE in prompt:
        return {"content": ANSWER, "reasoning_content": "The file is written."}
    if "[tito-task]" in prompt:
        call = {"name": "Bash", "arguments": {"command": COMMAND, "description": "Write out.txt"}}
        return {"content": "", "reasoning_content": "I run the command.", "tool_calls": [call]}
    return {"content": "Nothing to do."}
