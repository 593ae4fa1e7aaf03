#!/usr/bin/env bash
# Installs the pinned real agents the `agents` test stage drives (tests/agents/) into .agents/ (gitignored), and
# the Claude Agent SDK into the current Python environment. Idempotent: an install at the pinned version is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .agents

# Claude Code in its own npm prefix (its package ships the native binary as an optional dependency; the npm
# postinstall that links it is not needed: tests run .agents/claude/node_modules/@anthropic-ai/claude-code-linux-x64/claude).
CLAUDE_CODE_VERSION="2.1.332"
CLAUDE_AGENT_SDK_VERSION="0.2.189"
claude=".agents/claude/node_modules/@anthropic-ai/claude-code-linux-x64/claude"
if [[ "$("$claude" --version 2>/dev/null || true)" != "$CLAUDE_CODE_VERSION"* ]]; then
    npm install --prefix .agents/claude --no-audit --no-fund --silent "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION"
fi
python -m pip install -q "claude-agent-sdk==$CLAUDE_AGENT_SDK_VERSION"
