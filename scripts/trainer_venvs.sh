#!/usr/bin/env bash
# The trainers stage of .ci/run: each trainer installed for real, in its own venv, and tito's exports checked by the
# trainer's own code (pytest -m trainers; tests/trajectory/exports/trainers, docs/trainers.md).
#
#   trainers-verl   Python 3.11 with the CPU torch 2.13.0: verl 0.9.1 (with its dependencies; cachetools is
#                         one its code imports but its wheel does not declare) and AReaL 1.0.4. AReaL's own pins
#                         (torch<2.11, transformers<=5.3, a GPU and agent stack) do not install beside verl on CPU,
#                         so AReaL goes in without dependencies, plus what `areal.utils.data` imports.
#   trainers-py312  Python 3.12 (pyenv), which SkyRL 0.4 and NeMo Gym 0.4 require: skyrl 0.4.0 (its core: the
#                         skyrl-train extra builds flash-attn from source) with what its generator and trainer
#                         utilities import, and nemo-gym 0.4.0 without its server stack (mlflow, ray[default]),
#                         plus what its item types import. PyPI has no CPU build of torch for Python 3.12 (the CPU
#                         wheel on this machine is for 3.11, PyTorch's CPU index is unreachable), so this venv takes
#                         PyPI's torch 2.13.0 with its CUDA libraries (~4 GB), unused on the CPU.
#   trainers-verifiers  Python 3.12: verifiers 0.4.0 (what prime-rl's orchestrator ingests: its Trace types), on
#                         its own because it needs openai>=2.54 where nemo-gym 0.4.0 pins openai 2.7.2; no torch.
#
# The venvs are cached outside the checkout (scripts/venv_cache.sh: rebuilt only when this script or pyproject.toml
# changed); pip's cache makes a rebuild a download-free install. The tests run this checkout's code (PYTHONPATH=src).
# Run from the repository root:  scripts/trainer_venvs.sh [--install-only]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/venv_cache.sh
. scripts/venv_cache.sh
PY312="${TITO_PYTHON312:-$(pyenv root)/versions/3.12.1/bin/python}"  # the machine image's Python 3.12, under pyenv
TESTS=tests/trajectory/exports/trainers

if ! V="$(cached_venv trainers-verl python3.11)"; then
    "$V/bin/pip" install -q "torch==2.13.0"
    "$V/bin/pip" install -q -e . "verl==0.9.1" "cachetools==8.0.2" "pytest==9.2.0"
    "$V/bin/pip" install -q --no-deps "areal==1.0.4"
    "$V/bin/pip" install -q "colorlog==6.12.0" "flask==3.1.3" "lark==1.3.1" "numba==0.68.1" "einops==0.8.2" \
        "tenacity==9.2.1" "aiofiles==25.1.0"
    "$V/bin/python" -c "import torch; assert torch.version.cuda is None, torch.__version__"
    stamp_venv "$V"
fi
VERL="$V"

if ! V="$(cached_venv trainers-py312 "$PY312")"; then
    "$V/bin/pip" install -q "torch==2.13.0"
    "$V/bin/pip" install -q -e . "skyrl==0.4.0" "skyrl-gym==0.4.0" "ray==2.60.0" "torchdata==0.11.0" \
        "loguru==0.7.3" "jaxtyping==0.3.11" "pybase64==1.5.1" "pytest==9.2.0"
    "$V/bin/pip" install -q --no-deps "nemo-gym==0.4.0"
    "$V/bin/pip" install -q "openai==2.7.2" "itsdangerous==2.2.0" "aiohttp==3.14.5" "hydra-core==1.3.8" \
        "wandb==0.31.0" "yappi==1.7.6" "gprof2dot==2025.4.14" "pydot==4.0.1"
    stamp_venv "$V"
fi
PY312_VENV="$V"

if ! V="$(cached_venv trainers-verifiers "$PY312")"; then
    "$V/bin/pip" install -q -e . "verifiers==0.4.0" "pytest==9.2.0"
    stamp_venv "$V"
fi
VERIFIERS="$V"
[[ "${1:-}" == "--install-only" ]] && exit 0

export PYTHONPATH="$PWD/src"
"$VERL/bin/python" -m pytest -q -m trainers -p no:randomly "$TESTS/test_verl.py" "$TESTS/test_verl_step.py" \
    "$TESTS/test_areal.py"
"$PY312_VENV/bin/python" -m pytest -q -m trainers -p no:randomly "$TESTS/test_skyrl.py" \
    "$TESTS/test_skyrl_step.py" "$TESTS/test_nemo_gym.py"
"$VERIFIERS/bin/python" -m pytest -q -m trainers -p no:randomly "$TESTS/test_verifiers.py"
