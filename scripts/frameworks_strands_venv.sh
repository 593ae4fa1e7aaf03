#!/usr/bin/env bash
# Builds .venv-frameworks-strands (gitignored): strands-agents with its OpenAI and Anthropic models, pinned, beside
# tito (editable). strands-agents 1.62.0 needs openai<3 and anthropic<1, below what tito's own venv holds (the test
# extra's anthropic>=2.10), so its episodes run in this venv: tests/server/test_frameworks_strands.py (marker
# frameworks_strands) starts tito in its own process and drives tests/server/strands_episode.py with this venv's
# python. Idempotent: an existing venv with the pinned version is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-frameworks-strands
STRANDS="strands-agents[openai,anthropic]==1.62.0"
if [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c "import importlib.metadata as m; assert m.version('strands-agents') == '1.62.0'" 2>/dev/null; then
    exit 0
fi
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q -e . "$STRANDS"
