#!/usr/bin/env bash
# Makes .venv-frameworks-autogen (gitignored): autogen-agentchat, pinned, with the openai client tito's own venv pins.
# autogen-ext 0.7.5 pins protobuf 5, which conflicts with tito's own venv (checked with pip install --dry-run), so its
# episodes (AssistantAgent, reflect_on_tool_use on and off) run in this venv:
# tests/server/test_frameworks_venvs.py (marker frameworks_autogen) starts tito in its own process and drives
# tests/server/autogen_episode.py with this venv's python. The driver imports only tests/server/frameworks.py (standard
# library), so tito itself is not installed here. The venv is cached outside the checkout (scripts/venv_cache.sh) and linked here.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/venv_cache.sh
. scripts/venv_cache.sh
if ! V="$(cached_venv frameworks-autogen python3)"; then
    "$V/bin/python" -m pip install -q "autogen-agentchat==0.7.5" "autogen-ext[openai]==0.7.5" "openai==3.60.0"
    stamp_venv "$V"
fi
ln -sfn "$V" .venv-frameworks-autogen
