#!/usr/bin/env bash
# Builds .venv-frameworks-inspect (gitignored): inspect-ai, pinned, with the openai client tito's own venv pins.
# inspect-ai 0.3.285 changes fsspec and wrapt from what tito's own venv holds (checked with pip install --dry-run), so
# its episodes (a one-sample eval: use_tools + generate's tool loop, through its openai-api provider) run in this venv:
# tests/server/test_frameworks_venvs.py (marker frameworks_inspect) starts tito in its own process and drives
# tests/server/inspect_episode.py with this venv's python. The driver imports only tests/server/frameworks.py (standard
# library), so tito itself is not installed here. Idempotent: an existing venv with the pinned version is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-frameworks-inspect
if [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c "import importlib.metadata as m; assert m.version('inspect-ai') == '0.3.285'" 2>/dev/null; then
    exit 0
fi
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q "inspect-ai==0.3.285" "openai==3.60.0"
