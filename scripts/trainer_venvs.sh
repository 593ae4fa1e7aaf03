#!/usr/bin/env bash
# The trainers stage of .ci/run: each trainer installed for real, in its own venv, and tito's exports checked by the
# trainer's own code (pytest -m trainers; tests/trajectory/exports/trainers, docs/trainers.md).
#
#   .venv-trainers-verl   Python 3.11 with the CPU torch 2.13.0: verl 0.9.1 (with its dependencies; cachetools is
#                         one its code imports but its wheel does not declare) and AReaL 1.0.4. AReaL's own pins
#                         (torch<2.11, transformers<=5.3, a GPU and agent stack) do not install beside verl on CPU,
#                         so AReaL goes in without dependencies, plus what `areal.utils.data` imports.
#   .venv-trainers-py312  Python 3.12 (pyenv), which SkyRL 0.4 and NeMo Gym 0.4 require: skyrl 0.4.0 (its core: the
#                         skyrl-train extra builds flash-attn from source) with what its generator and trainer
#                         utilities import, and nemo-gym 0.4.0 without its server stack (mlflow, ray[default]),
#                         plus what its item types import. PyPI has no CPU build of torch for Python 3.12 (the CPU
#                         wheel on this machine is for 3.11, PyTorch's CPU index is unreachable), so this venv takes
#                         PyPI's torch 2.13.0 with its CUDA libraries (~4 GB), unused on the CPU.
#
# A venv is rebuilt only when this script changed since it was built (its hash is stamped inside); pip's cache
# makes a rebuild a download-free install. Run from the repository root:  scripts/trainer_venvs.sh [--install-only]
set -euo pipefail
cd "$(dirname "$0")/.."
PY312="${TITO_PYTHON312:-/root/.pyenv/versions/3.12.1/bin/python}"
STAMP="$(sha256sum "$0" | cut -c1-16)"
TESTS=tests/trajectory/exports/trainers

# venv DIR PYTHON: true when DIR was built by this version of the script; else makes it afresh and returns false.
fresh_venv() {
    if [[ -f "$1/tito-stamp" && "$(cat "$1/tito-stamp")" == "$STAMP" ]]; then return 0; fi
    rm -rf "$1"
    "$2" -m venv "$1"
    "$1/bin/python" -m pip install -q --upgrade pip
    return 1
}

V=.venv-trainers-verl
if ! fresh_venv "$V" python3.11; then
    "$V/bin/pip" install -q "torch==2.13.0"
    "$V/bin/pip" install -q -e . "verl==0.9.1" "cachetools==8.0.2" "pytest==9.2.0"
    "$V/bin/pip" install -q --no-deps "areal==1.0.4"
    "$V/bin/pip" install -q "colorlog==6.12.0" "flask==3.1.3" "lark==1.3.1" "numba==0.68.1" "einops==0.8.2" \
        "tenacity==9.2.1" "aiofiles==25.1.0"
    "$V/bin/python" -c "import torch; assert torch.version.cuda is None, torch.__version__"
    echo "$STAMP" > "$V/tito-stamp"
fi

V=.venv-trainers-py312
if ! fresh_venv "$V" "$PY312"; then
    "$V/bin/pip" install -q "torch==2.13.0"
    "$V/bin/pip" install -q -e . "skyrl==0.4.0" "skyrl-gym==0.4.0" "ray==2.60.0" "torchdata==0.11.0" \
        "loguru==0.7.3" "jaxtyping==0.3.11" "pybase64==1.5.1" "pytest==9.2.0"
    "$V/bin/pip" install -q --no-deps "nemo-gym==0.4.0"
    "$V/bin/pip" install -q "openai==2.7.2" "itsdangerous==2.2.0" "aiohttp==3.14.5" "hydra-core==1.3.8" \
        "wandb==0.31.0" "yappi==1.7.6" "gprof2dot==2025.4.14" "pydot==4.0.1"
    echo "$STAMP" > "$V/tito-stamp"
fi
[[ "${1:-}" == "--install-only" ]] && exit 0

.venv-trainers-verl/bin/python -m pytest -q -m trainers -p no:randomly "$TESTS/test_verl.py" "$TESTS/test_verl_step.py" \
    "$TESTS/test_areal.py"
.venv-trainers-py312/bin/python -m pytest -q -m trainers -p no:randomly "$TESTS/test_skyrl.py" "$TESTS/test_nemo_gym.py"
