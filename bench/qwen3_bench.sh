#!/usr/bin/env bash
# Qwen3-0.6B's layout at full width (28 layers, 1024 wide, 16/8 heads of 128, 3072 MLP, tied
# 151,936-row embedding) with random weights, as f16 and q8_0 GGUF files in llama.cpp's layout,
# timed by parlance (bench/qwen3_bench.cpp) and by llama.cpp's llama-bench from the pinned bundle
# on the same file, the same threads, in one run: prefill tokens/s (pp) and decode ms/token (tg).
# Usage: bench/qwen3_bench.sh [--prompt 128] [--tokens 32] [--reps 2] [--threads "1 2"]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${PARLANCE_CACHE:-$HOME/.cache/parlance}"
PROMPT=128; TOKENS=32; REPS=2; THREADS="1 2"
while [ $# -gt 0 ]; do
  case "$1" in
    --prompt) PROMPT="$2"; shift 2 ;;
    --tokens) TOKENS="$2"; shift 2 ;;
    --reps) REPS="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    *) echo "bench/qwen3_bench.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
log() { printf '[qwen3-bench] %s\n' "$*" >&2; }
B="$ROOT/bench/build"
cmake -S "$ROOT/bench" -B "$B" -DCMAKE_BUILD_TYPE=Release >"$B.configure.log" 2>&1 || { tail -30 "$B.configure.log"; exit 1; }
log "building qwen3_bench and write_qwen3_fixture"
cmake --build "$B" --target qwen3_bench write_qwen3_fixture -j"${JOBS:-$(nproc)}" >"$B.build.log" 2>&1 || { tail -40 "$B.build.log"; exit 1; }
LLAMA_BENCH="$(bash "$ROOT/bench/build_llama_bench.sh")"
M="$CACHE/bench/qwen3-0.6b-layout"
FULL='{"hidden_size":1024,"intermediate_size":3072,"max_position_embeddings":40960}'
for t in f16 q8_0; do
  if [ ! -f "$M-$t/model.gguf" ]; then
    log "writing the 0.6B layout as $t GGUF into $M-$t"
    "$B/tests/write_qwen3_fixture" layout-0.6b "$M-$t" --gguf "--$t" --edit "$FULL" >/dev/null
  fi
done
echo "| weights | threads | tool | prefill pp$PROMPT (tokens/s) | decode tg$TOKENS (ms/token) |"
echo "|---|---|---|---|---|"
for t in f16 q8_0; do
  for th in $THREADS; do
    p=$("$B/qwen3_bench" --model "$M-$t/model.gguf" --threads "$th" --prompt "$PROMPT" --tokens "$TOKENS" --reps "$REPS" --warmup 0)
    l=$("$LLAMA_BENCH" -m "$M-$t/model.gguf" -t "$th" -p "$PROMPT" -n "$TOKENS" -r "$REPS" -o json 2>/dev/null)
    python3 - "$t" "$th" "$p" "$l" <<'PY'
import json, statistics, sys
t, th, p, l = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
pp = statistics.median(p["pp_tokens_per_s"]); tg = statistics.median(p["tg_ms_per_token"])
lpp = next(r for r in l if r["n_prompt"] > 0)["avg_ts"]; ltg = 1000.0 / next(r for r in l if r["n_gen"] > 0)["avg_ts"]
print(f"| {t} | {th} | parlance | {pp:.1f} | {tg:.1f} |")
print(f"| {t} | {th} | llama.cpp llama-bench | {lpp:.1f} | {ltg:.1f} |")
print(f"| {t} | {th} | ratio parlance / llama.cpp | {pp / lpp:.2f}x | {tg / ltg:.2f}x |")
PY
  done
done
