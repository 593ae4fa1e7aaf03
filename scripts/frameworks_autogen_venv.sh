#!/usr/bin/env bash
# Builds .venv-frameworks-autogen (gitignored): autogen-agentchat, pinned, with the openai client tito's own venv pins.
# autogen-ext 0.7.5 pins protobuf 5, which conflicts with tito's own venv (checked with pip install --dry-run), so its
# episodes (AssistantAgent, reflect_on_tool_use on and off) run in this venv:
# tests/server/test_frameworks_venvs.py (marker frameworks_autogen) starts tito in its own process and drives
# tests/server/autogen_episode.py with this venv's python. The driver imports only tests/server/frameworks.py (standard
# library), so tito itself is not installed here. Idempotent: an existing venv with the pinned version is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-frameworks-autogen
if [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c "import importlib.metadata as m; assert m.version('autogen-agentchat') == '0.7.5'" 2>/dev/null; then
    exit 0
fi
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q "autogen-agentchat==0.7.5" "autogen-ext[openai]==0.7.5" "openai==3.60.0"
