#!/usr/bin/env bash
# Qwen3-ASR through the server next to llama.cpp's serial throughput (issue 15's "4 concurrent
# 10 s requests"). `parlance serve` on a GGUF pair written by bench/qwen3_asr_bench.sh gets
# --requests requests at once (curl, multipart, json, temperature 0), the server capping each at
# --tokens new tokens (random weights seldom stop earlier); throughput is requests per wall-clock
# second from the first request sent to the last answer. The anchor is llama-mtmd-cli on the same
# pair, clip, threads and token count, one request after another: its per-request time is
# llama_perf's "prompt eval time" (which spans the audio's encoding as well as the prompt's
# decode: it exceeds the sum of the "encoding done" and "decoded" lines by the text prompt's few
# tokens) plus its "eval time" (the generated tokens) — everything but the model load a server
# pays once. Medians over --reps.
# Usage: bench/qwen3_asr_serve_bench.sh [--pair DIR] [--clip WAV] [--requests 4] [--threads 2]
#                                       [--tokens 33] [--reps 3]
# Needs bench/qwen3_asr_bench.sh to have run once (it writes the pair, the clips and llama-mtmd-cli).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${PARLANCE_CACHE:-$HOME/.cache/parlance}"
PAIR="$(ls -d "$CACHE"/bench/qwen3-asr-0.6b-f16-* 2>/dev/null | head -1 || true)"  # none yet: --pair must say
CLIP="$CACHE/bench/qwen3-asr-clips/clip10.wav"
N=4; THREADS=2; TOKENS=33; REPS=3
while [ $# -gt 0 ]; do
  case "$1" in
    --pair) PAIR="$2"; shift 2 ;;
    --clip) CLIP="$2"; shift 2 ;;
    --requests) N="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --tokens) TOKENS="$2"; shift 2 ;;
    --reps) REPS="$2"; shift 2 ;;
    *) echo "bench/qwen3_asr_serve_bench.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ -f "$PAIR/mmproj.gguf" ] && [ -f "$CLIP" ] || { echo "run bench/qwen3_asr_bench.sh first (no pair or clip)" >&2; exit 1; }
MTMD="$CACHE/bench/llama.cpp-3.21.1-build/bin/llama-mtmd-cli"
[ -x "$MTMD" ] || MTMD="$(bash "$ROOT/bench/build_llama_bench.sh" llama-mtmd-cli)"
PARLANCE="$ROOT/build/parlance"
log() { printf '[qwen3-asr-serve-bench] %s\n' "$*" >&2; }
WORK="$(mktemp -d)"
"$PARLANCE" serve --model "$PAIR" --port 0 --threads "$THREADS" --max-new-tokens "$TOKENS" --cache-slots $((2 * N)) \
  --max-queue $((4 * N)) --timeout 0 >"$WORK/serve.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null || true; rm -rf "$WORK"' EXIT
PORT=""
for _ in $(seq 600); do
  PORT=$(sed -nE 's/.*listening on http:\/\/127\.0\.0\.1:([0-9]+).*/\1/p' "$WORK/serve.log" | head -1)
  [ -n "$PORT" ] && curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
  sleep 0.2
done
curl -sf "http://127.0.0.1:$PORT/health" >/dev/null || { cat "$WORK/serve.log" >&2; exit 1; }
URL="http://127.0.0.1:$PORT/v1/audio/transcriptions"
post() { curl -sf -o "$WORK/$1.json" -F "file=@$CLIP" -F model=whisper-1 -F temperature=0 -F response_format=json "$URL"; }
now() { date +%s.%N; }
post warmup
batch() {  # COUNT -> wall seconds for COUNT requests sent at once
  local t0 t1 i
  t0=$(now)
  for i in $(seq 1 "$1"); do post "r$i" & done
  wait $(jobs -p | grep -v "^$SERVER$")
  t1=$(now)
  python3 -c "print($t1 - $t0)"
}
par=(); one=(); ll=()
for _ in $(seq 1 "$REPS"); do
  one+=("$(batch 1)")
  par+=("$(batch "$N")")
  "$MTMD" -m "$PAIR/model.gguf" --mmproj "$PAIR/mmproj.gguf" --audio "$CLIP" -p "Transcribe the audio." \
    -n "$TOKENS" --ignore-eos --temp 0 -t "$THREADS" --no-warmup -c 4096 --perf -lv 4 >/dev/null 2>"$WORK/mtmd.txt"
  ll+=("$(python3 - "$WORK/mtmd.txt" <<'PY'
import re, sys
err = open(sys.argv[1], errors="replace").read()
prompt = float(re.search(r"prompt eval time =\s*([\d.]+) ms", err)[1])
gen = float(re.search(r" eval time =\s*([\d.]+) ms /\s*\d+ runs", err)[1])
print(prompt + gen)
PY
)")
done
log "load after: $(uptime | sed 's/.*load average: //')"
python3 - "$N" "$THREADS" "$TOKENS" "$(basename "$PAIR")" "${one[*]}" "${par[*]}" "${ll[*]}" <<'PY'
import statistics, sys
n, th, tok, pair = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
one = [float(x) for x in sys.argv[5].split()]
par = [float(x) for x in sys.argv[6].split()]
ll = [float(x) / 1000.0 for x in sys.argv[7].split()]
m1, mp, ml = statistics.median(one), statistics.median(par), statistics.median(ll)
print(f"| pair | threads | tokens | llama.cpp serial s/request | parlance 1 request s | parlance {n} at once s | "
      f"parlance req/s | llama.cpp serial req/s | ratio |")
print("|---|---|---|---|---|---|---|---|---|")
print(f"| {pair} | {th} | {tok} | {ml:.2f} | {m1:.2f} | {mp:.2f} | {n / mp:.3f} | {1 / ml:.3f} | **{(n / mp) * ml:.2f}x** |")
PY
