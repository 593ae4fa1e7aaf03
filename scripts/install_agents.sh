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

# Codex, Qwen Code and opencode in the .agents/ prefix (bins in .agents/node_modules/.bin). Codex and opencode ship
# their native binaries as optional dependencies (npm's skipped postinstalls are not needed). Qwen Code 0.2x needs
# node >= 22; 0.15.10 runs on node 20. opencode 1.18.33 bundles @ai-sdk/openai-compatible (older versions installed
# it into their HOME on first use), so the tests need no network.
CODEX_VERSION="0.171.0"
QWEN_CODE_VERSION="0.15.10"
OPENCODE_VERSION="1.18.33"
installed() { node -p "require('./.agents/node_modules/$1/package.json').version" 2>/dev/null || true; }
if [[ "$(installed @openai/codex)" != "$CODEX_VERSION" || "$(installed @qwen-code/qwen-code)" != "$QWEN_CODE_VERSION" \
      || "$(installed opencode-ai)" != "$OPENCODE_VERSION" ]]; then
    npm install --prefix .agents --no-audit --no-fund --silent "@openai/codex@$CODEX_VERSION" \
        "@qwen-code/qwen-code@$QWEN_CODE_VERSION" "opencode-ai@$OPENCODE_VERSION"
fi
