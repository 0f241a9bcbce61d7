#!/usr/bin/env bash
# Chat serving next to llama.cpp's llama-server, on the same GGUF (Qwen3-0.6B's layout at full
# width, random f16 weights in llama.cpp's layout, with the real Qwen3 tokenizer and template),
# the same threads, in one run: generated tokens/s at several concurrencies (fixed-length greedy
# completions, ignore_eos) and time to first token of a long shared prompt, cold and as a prefix
# hit. Prints a markdown table for BENCHMARKS.md.
# Usage: bench/chat_bench.sh [--threads 2] [--concurrency 1,8,32] [--requests 2] [--max-tokens 64]
#        [--prefix 2000] [--weights f16|q8_0]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${PARLANCE_CACHE:-$HOME/.cache/parlance}"
THREADS=2; CONC="1,8,32"; REQ=2; MAXT=64; PREFIX=2000; W=f16
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) THREADS="$2"; shift 2 ;;
    --concurrency) CONC="$2"; shift 2 ;;
    --requests) REQ="$2"; shift 2 ;;
    --max-tokens) MAXT="$2"; shift 2 ;;
    --prefix) PREFIX="$2"; shift 2 ;;
    --weights) W="$2"; shift 2 ;;
    *) echo "bench/chat_bench.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
log() { printf '[chat-bench] %s\n' "$*" >&2; }
PARLANCE="$ROOT/build/parlance"
WRITER="$ROOT/build/tests/write_qwen3_fixture"
[ -x "$PARLANCE" ] && [ -x "$WRITER" ] || { echo "build parlance first (scripts/run.sh or cmake --build build)" >&2; exit 1; }
LLAMA_SERVER="$(bash "$ROOT/bench/build_llama_bench.sh" llama-server)"
M="$CACHE/bench/qwen3-0.6b-layout-$W"
if [ ! -f "$M/model.gguf" ]; then
  log "writing the 0.6B layout as $W GGUF into $M"
  "$WRITER" layout-0.6b "$M" --gguf "--$W" --edit '{"hidden_size":1024,"intermediate_size":3072,"max_position_embeddings":40960}' >/dev/null
fi
GGUF="$M/model.gguf"
MAXC="${CONC##*,}"
PORT=18555
wait_ready() {
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$PORT/health" 2>/dev/null | grep -q ok && return 0
    sleep 0.2
  done
  return 1
}
run_server() {  # name, mode (throughput|prefix), then the command; prints the bench's JSON line
  local name="$1" mode="$2"; shift 2
  "$@" >"/tmp/chat-bench-$name-$mode.log" 2>&1 &
  local pid=$!
  wait_ready || { tail -20 "/tmp/chat-bench-$name-$mode.log" >&2; kill $pid; exit 1; }
  if [ "$mode" = throughput ]; then
    log "$name: throughput at concurrency $CONC"
    node "$ROOT/bench/chat_bench.mjs" --url "http://127.0.0.1:$PORT" --model qwen3 --concurrency "$CONC" \
      --requests "$REQ" --max-tokens "$MAXT"
  else
    log "$name: time to first token, a $PREFIX-token shared prompt, cold and as a prefix hit"
    node "$ROOT/bench/chat_bench.mjs" --url "http://127.0.0.1:$PORT" --model qwen3 --prefix "$PREFIX" --reps 2
  fi
  kill $pid; wait $pid 2>/dev/null || true
}
# llama-server splits -c over its -np slots: each slot holds one request's prompt and completion.
SLOT=$(( MAXT + 256 ))
LONG=$(( PREFIX + 512 ))
L1=$(run_server llama-server throughput "$LLAMA_SERVER" -m "$GGUF" -t "$THREADS" -tb "$THREADS" \
       -c $(( MAXC * SLOT )) -np "$MAXC" --jinja --port $PORT --host 127.0.0.1 -a qwen3)
L2=$(run_server llama-server prefix "$LLAMA_SERVER" -m "$GGUF" -t "$THREADS" -tb "$THREADS" -c "$LONG" -np 1 \
       --jinja --port $PORT --host 127.0.0.1 -a qwen3)
P1=$(run_server parlance throughput "$PARLANCE" serve --port $PORT --threads "$THREADS" --chat-model "$GGUF" \
       --chat-model-id qwen3 --chat-kv-cache-mb 2048 --chat-max-queue 64)
P2=$(run_server parlance prefix "$PARLANCE" serve --port $PORT --threads "$THREADS" --chat-model "$GGUF" \
       --chat-model-id qwen3 --chat-kv-cache-mb 2048)
L="$L1"$'\n'"$L2"
P="$P1"$'\n'"$P2"
python3 - "$W" "$THREADS" "$L" "$P" <<'PY'
import json, sys
w, th, l, p = sys.argv[1], sys.argv[2], sys.argv[3].splitlines(), sys.argv[4].splitlines()
lt, lp = json.loads(l[0]), json.loads(l[1]); pt, pp = json.loads(p[0]), json.loads(p[1])
print(f"Qwen3-0.6B layout, random {w} GGUF, {th} threads, greedy, ignore_eos, {pt[0]['requests'] // max(1, pt[0]['concurrency'])} requests per client\n")
print("| concurrency | parlance tokens/s | llama-server tokens/s | ratio | parlance TTFT p50 | llama-server TTFT p50 |")
print("|---|---|---|---|---|---|")
for a, b in zip(pt, lt):
    print(f"| {a['concurrency']} | {a['tokens_per_s']:.1f} | {b['tokens_per_s']:.1f} | {a['tokens_per_s'] / b['tokens_per_s']:.2f}x | {a['ttft_p50_ms']:.0f} ms | {b['ttft_p50_ms']:.0f} ms |")
def med(x): s = sorted(x); return s[len(s) // 2]
print(f"\n| {pp['prefix_words']}-word shared prompt | cold TTFT | prefix-hit TTFT | cut |")
print("|---|---|---|---|")
for name, r in (("parlance", pp), ("llama-server", lp)):
    c, h = med(r["cold_ms"]), med(r["warm_ms"])
    print(f"| {name} | {c:.0f} ms | {h:.0f} ms | {c / h:.1f}x |")
PY
