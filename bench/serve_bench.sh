#!/usr/bin/env bash
# Server throughput and latency next to whisper.cpp (issue 4's benchmark).
#
# `parlance serve` on the base layout (random f16 weights, the .bin bench/run.sh generates) gets
# N requests at concurrency 1, 4, 8 and 16 (curl, multipart, verbose_json, temperature 0); then
# whisper.cpp (bench/anchor/whisper_cpp_serial.cpp, same ggml, same .bin, same threads)
# transcribes the same file as many times one after another. Throughput is requests and audio
# seconds per wall-clock second; latency is each request's time at the client. Random weights
# decode arbitrary tokens, so each side's decoded tokens per request are reported too.
#
# Usage: bench/serve_bench.sh [--threads 2] [--file tests/fixtures/audio/jfk.wav] [--layout base]
#        [--levels "1 4 8 16"] [--per-client 2]
# Needs bench/run.sh to have built bench/build and generated $PARLANCE_CACHE/bench/LAYOUT.bin,
# and build/parlance (scripts/test.sh or cmake --build build).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${PARLANCE_CACHE:-$HOME/.cache/parlance}"
THREADS=2; FILE="$ROOT/tests/fixtures/audio/jfk.wav"; LAYOUT=base; LEVELS="1 4 8 16"; PER=2
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) THREADS="$2"; shift 2 ;;
    --file) FILE="$2"; shift 2 ;;
    --layout) LAYOUT="$2"; shift 2 ;;
    --levels) LEVELS="$2"; shift 2 ;;
    --per-client) PER="$2"; shift 2 ;;
    *) echo "serve_bench.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
MODEL="$CACHE/bench/$LAYOUT.bin"
B="$ROOT/bench/build"
PARLANCE="$ROOT/build/parlance"
[ -f "$MODEL" ] || { echo "no $MODEL: run bench/run.sh first" >&2; exit 1; }
[ -x "$PARLANCE" ] || { echo "no $PARLANCE: build first" >&2; exit 1; }
{ cmake -S "$ROOT/bench" -B "$B" && cmake --build "$B" --target whisper_cpp_serial -j1; } >"$B.serial.build.log" 2>&1 || { tail -20 "$B.serial.build.log"; exit 1; }
OUTF="$B/serve-$(date +%Y%m%d-%H%M%S).jsonl"
log() { printf '[serve-bench] %s\n' "$*" >&2; }
log "load before: $(uptime | sed 's/.*load average: //')"

max_level=$(tr ' ' '\n' <<<"$LEVELS" | sort -n | tail -1)
slots=$((2 * max_level))
LOGF="$B/serve.log"
"$PARLANCE" serve --model "$MODEL" --port 0 --threads "$THREADS" --cache-slots "$slots" \
    --max-queue "$((4 * max_level))" --timeout 0 >"$LOGF" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null || true' EXIT
PORT=""
for _ in $(seq 600); do
  PORT=$(sed -nE 's/.*listening on http:\/\/127\.0\.0\.1:([0-9]+).*/\1/p' "$LOGF" | head -1)
  [ -n "$PORT" ] && curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
  sleep 0.2
done
curl -sf "http://127.0.0.1:$PORT/health" >/dev/null || { cat "$LOGF"; exit 1; }
URL="http://127.0.0.1:$PORT/v1/audio/transcriptions"
one() {  # one request: its body and time go to $RES_DIR/$1, parsed after the clock stops
  curl -s -o "$RES_DIR/$1.json" -w '%{time_total}\n' -F "file=@$FILE" -F model=whisper -F temperature=0 \
      -F response_format=verbose_json "$URL" >"$RES_DIR/$1.time"
}
RES_DIR=$(mktemp -d)
export -f one; export FILE URL RES_DIR
one warmup  # first-request allocations are not part of the figures
for C in $LEVELS; do
  N=$((C * PER))
  t0=$(date +%s.%N)
  rm -f "$RES_DIR"/r*
  seq "$N" | xargs -P "$C" -I{} bash -c 'one r{}'
  t1=$(date +%s.%N)
  res=$(for f in "$RES_DIR"/r*.json; do
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(open(sys.argv[2]).read().strip(), sum(len(s["tokens"]) for s in d["segments"]))' \
        "$f" "${f%.json}.time"
  done)
  python3 - "$C" "$N" "$t0" "$t1" "$FILE" "$THREADS" <<PY >>"$OUTF"
import json, sys, wave
c, n, t0, t1, f, threads = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5], int(sys.argv[6])
rows = [l.split() for l in """$res""".strip().splitlines()]
w = wave.open(f); audio = w.getnframes() / w.getframerate()
print(json.dumps({"tool": "parlance serve", "concurrency": c, "threads": threads, "requests": n,
                  "audio_seconds": audio, "wall_ms": (t1 - t0) * 1000,
                  "request_ms": [float(r[0]) * 1000 for r in rows], "tokens": [int(r[1]) for r in rows]}))
PY
  log "concurrency $C: $N requests in $(python3 -c "print(round($t1-$t0,2))") s"
done
kill $SERVER; wait $SERVER 2>/dev/null || true; trap - EXIT

N=$((PER * 4))
log "whisper.cpp serial: $N requests"
"$B/whisper_cpp_serial" --model "$MODEL" --file "$FILE" --threads "$THREADS" --requests "$N" >>"$OUTF" 2>>"$B/serial.log"
log "load after: $(uptime | sed 's/.*load average: //')"
log "results: $OUTF"
python3 - "$OUTF" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
anchor = next(r for r in rows if r["tool"] == "whisper.cpp")
def stats(r):
    thr = r["requests"] / (r["wall_ms"] / 1000)
    lat = sorted(r["request_ms"])
    p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]
    return thr, statistics.median(lat), p(0.95), statistics.mean(r["tokens"])
a_thr = stats(anchor)[0]
print("| server | concurrency | requests | requests/s | audio s / s | vs whisper.cpp serial | latency p50 (s) | p95 (s) | tokens/request |")
print("|---|---|---|---|---|---|---|---|---|")
for r in rows:
    thr, p50, p95, tok = stats(r)
    name = "whisper.cpp (serial)" if r["tool"] == "whisper.cpp" else "parlance serve"
    conc = "1 (in a row)" if r["tool"] == "whisper.cpp" else str(r["concurrency"])
    print("| %s | %s | %d | %.3f | %.2f | %.2f× | %.2f | %.2f | %.0f |" % (
        name, conc, r["requests"], thr, thr * r["audio_seconds"], thr / a_thr, p50 / 1000, p95 / 1000, tok))
PY
