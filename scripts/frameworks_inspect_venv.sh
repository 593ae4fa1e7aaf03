#!/usr/bin/env bash
# Makes .venv-frameworks-inspect (gitignored): inspect-ai, pinned, with the openai client tito's own venv pins.
# inspect-ai 0.3.285 changes fsspec and wrapt from what tito's own venv holds (checked with pip install --dry-run), so
# its episodes (a one-sample eval: use_tools + generate's tool loop, through its openai-api provider) run in this venv:
# tests/server/test_frameworks_venvs.py (marker frameworks_inspect) starts tito in its own process and drives
# tests/server/inspect_episode.py with this venv's python. The driver imports only tests/server/frameworks.py (standard
# library), so tito itself is not installed here. The venv is cached outside the checkout (scripts/venv_cache.sh) and linked here.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/venv_cache.sh
. scripts/venv_cache.sh
if ! V="$(cached_venv frameworks-inspect python3)"; then
    "$V/bin/python" -m pip install -q "inspect-ai==0.3.285" "openai==3.60.0"
    stamp_venv "$V"
fi
ln -sfn "$V" .venv-frameworks-inspect
