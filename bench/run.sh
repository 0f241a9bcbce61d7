#!/usr/bin/env bash
# Builds the benchmark harness and its anchor (whisper.cpp from npm @fugood/whisper.node@1.1.3,
# against our ggml), generates full-size random-weight Whisper checkpoints, runs parlance and
# whisper.cpp on the same .bin file with the same threads, and prints the markdown table.
#
# Usage: bench/run.sh [--plan "LAYOUT:THREADS:REPS[:WARMUP] ..."] [--tokens 64] [--jobs 1]
#   default plan: "base:1,2:5 small:1,2:3 large-v3-turbo:1:3:0" (THREADS comma-separated; each
#   tool runs REPS timed encodes and REPS x TOKENS decoder steps after WARMUP untimed encodes)
# Env: PARLANCE_CACHE (default ~/.cache/parlance); models go to $PARLANCE_CACHE/bench.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${PARLANCE_CACHE:-$HOME/.cache/parlance}"
PLAN="base:1,2:5 small:1,2:3 large-v3-turbo:1:3:0"; TOKENS=64; JOBS=1
while [ $# -gt 0 ]; do
  case "$1" in
    --plan) PLAN="$2"; shift 2 ;;
    --tokens) TOKENS="$2"; shift 2 ;;
    --jobs) JOBS="$2"; shift 2 ;;
    *) echo "bench/run.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
log() { printf '[bench] %s\n' "$*" >&2; }
source "$ROOT/scripts/lib/fetch_npm.sh"

# ---------------------------------------------------------------- the anchor's sources
WN_TGZ=$(fetch_npm @fugood/whisper.node 1.1.3 \
  'sha512-wiDjBuKUa6ji6HItkW99TwQI3Q4wf7yh0W/xeroJfZLctQrSM+xfUcoY9iH/w7su3gjW5R6z3tTHJPaF468kig==')
WCPP="$CACHE/whisper.node-1.1.3/whisper.cpp"
if [ ! -f "$CACHE/whisper.node-1.1.3/.parlance-ok" ]; then
  log "unpacking whisper.cpp sources from $WN_TGZ"
  rm -rf "$CACHE/whisper.node-1.1.3"; mkdir -p "$CACHE/whisper.node-1.1.3"
  tar xzf "$WN_TGZ" -C "$CACHE/whisper.node-1.1.3" --strip-components=1 \
    package/whisper.cpp/src package/whisper.cpp/include package/LICENSE
  touch "$CACHE/whisper.node-1.1.3/.parlance-ok"
fi

# ---------------------------------------------------------------- build (bench/build, ignored)
B="$ROOT/bench/build"
cmake -S "$ROOT/bench" -B "$B" -DCMAKE_BUILD_TYPE=Release -DWHISPER_CPP_DIR="$WCPP" >"$B.configure.log" 2>&1 \
    || { tail -30 "$B.configure.log"; exit 1; }
log "building (-j$JOBS)"
cmake --build "$B" --target make_random_whisper parlance_bench whisper_cpp_bench -j"$JOBS" >"$B.build.log" 2>&1 \
  || { tail -40 "$B.build.log"; exit 1; }

# ---------------------------------------------------------------- random full-size checkpoints
M="$CACHE/bench"
mkdir -p "$M"
LAYOUTS=""; ALL_THREADS=""
for p in $PLAN; do
  LAYOUTS="$LAYOUTS ${p%%:*}"; t="${p#*:}"; ALL_THREADS="$ALL_THREADS ${t%%:*}"
done
ALL_THREADS=$(echo "$ALL_THREADS" | tr ', ' '\n\n' | sort -un | tr '\n' ' ')
for L in $LAYOUTS; do
  if [ ! -f "$M/$L.bin" ]; then
    log "generating $L (random f16 weights) into $M"
    "$B/make_random_whisper" --layout "$L" --fixtures "$ROOT/tests/fixtures/whisper" --out "$M"
  fi
done

# ---------------------------------------------------------------- measure
OUTF="$B/results-$(date +%Y%m%d-%H%M%S).jsonl"
log "load before: $(uptime)"
for T in $ALL_THREADS; do "$B/parlance_bench" --bandwidth --threads "$T" >>"$OUTF"; done
for p in $PLAN; do
  IFS=: read -r L TS REPS WARMUP <<<"$p"
  for T in ${TS//,/ }; do
    args=(--model "$M/$L.bin" --threads "$T" --reps "$REPS" --warmup "${WARMUP:-1}" --tokens "$TOKENS")
    up="$(uptime | sed 's/.*load average: //')"
    log "$L, $T thread(s), $REPS reps (load average $up)"
    echo "{\"tool\":\"load\",\"model\":\"$L\",\"threads\":$T,\"loadavg\":\"$up\",\"date\":\"$(date -Iseconds)\"}" >>"$OUTF"
    "$B/parlance_bench" "${args[@]}" >>"$OUTF" 2>>"$B/run.log"
    "$B/whisper_cpp_bench" "${args[@]}" --flash-attn 0 >>"$OUTF" 2>>"$B/run.log"
    "$B/whisper_cpp_bench" "${args[@]}" --flash-attn 1 >>"$OUTF" 2>>"$B/run.log"
  done
done
log "load after: $(uptime)"
log "results: $OUTF"
python3 "$ROOT/bench/table.py" "$OUTF"
