#!/usr/bin/env bash
# Makes .venv-frameworks-strands (gitignored): strands-agents with its OpenAI and Anthropic models, pinned. The
# episode driver imports only tests/server/frameworks.py, so tito is not installed here. strands-agents 1.62.0 needs
# openai<3 and anthropic<1, below what tito's own venv holds (the test extra's anthropic>=2.10), so its episodes run
# in this venv: tests/server/test_frameworks_strands.py (marker frameworks_strands) starts tito in its own process
# and drives tests/server/strands_episode.py with this venv's python. The venv is cached outside the checkout
# (scripts/venv_cache.sh) and linked here.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/venv_cache.sh
. scripts/venv_cache.sh
STRANDS="strands-agents[openai,anthropic]==1.62.0"
if ! V="$(cached_venv frameworks-strands python3)"; then
    "$V/bin/python" -m pip install -q "$STRANDS"
    stamp_venv "$V"
fi
ln -sfn "$V" .venv-frameworks-strands
