#!/usr/bin/env bash
# Server throughput and latency next to whisper.cpp (issues 4 and 14).
#
# `parlance serve` gets N requests at concurrency 1, 4, 8 and 16 (curl, multipart, verbose_json,
# temperature 0); then whisper.cpp (bench/anchor/whisper_cpp_serial.cpp, same ggml, same weights,
# same threads, the same beam size as the server decodes) transcribes the same file as many times
# one after another. Throughput is requests and audio seconds per wall-clock second; latency is
# each request's time at the client; each side's decoded tokens per request and whether their
# transcripts agree are reported too.
#
# Two kinds of weights:
#   --layout base       (default) a full-size layout with random f16 weights, the .bin
#                       bench/run.sh generates: both load the same file; random weights decode
#                       arbitrary tokens (2-3 per request on jfk.wav)
#   --model-dir DIR     a trained HF checkpoint, e.g. models/parlance-synth-en (the bundled model):
#                       parlance serves DIR, whisper.cpp a .bin of the same weights written at
#                       OpenAI's token ids (`parlance convert --openai-ids`; the ids the model
#                       lacks are suppressed in whisper.cpp by a logits filter, so both decode
#                       the model's own distribution). Default file: the bundled long.wav cut at
#                       its quietest 100 ms between 35 and 50 s (real speech, a real transcript).
#
# Usage: bench/serve_bench.sh [--threads 2] [--file F.wav] [--layout base | --model-dir DIR]
#        [--levels "1 4 8 16"] [--per-client 2] [--device cpu|cuda]
# Needs bench/run.sh to have built bench/build (and, for --layout, generated
# $PARLANCE_CACHE/bench/LAYOUT.bin), and build/parlance (scripts/test.sh or cmake --build build).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${PARLANCE_CACHE:-$HOME/.cache/parlance}"
THREADS=2; FILE=""; LAYOUT=base; MODEL_DIR=""; LEVELS="1 4 8 16"; PER=2; DEVICE=cpu
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) THREADS="$2"; shift 2 ;;
    --file) FILE="$2"; shift 2 ;;
    --layout) LAYOUT="$2"; shift 2 ;;
    --model-dir) MODEL_DIR="$(cd "$2" && pwd)"; shift 2 ;;
    --device) DEVICE="$2"; shift 2 ;;
    --levels) LEVELS="$2"; shift 2 ;;
    --per-client) PER="$2"; shift 2 ;;
    *) echo "serve_bench.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
B="$ROOT/bench/build"
mkdir -p "$B"
PARLANCE="${PARLANCE:-$ROOT/build/parlance}"
[ -x "$PARLANCE" ] || { echo "no $PARLANCE: build first" >&2; exit 1; }
BEAMS=1; SUPPRESS=""
if [ -n "$MODEL_DIR" ]; then
  SERVED="$MODEL_DIR"
  MODEL="$B/anchor-$(basename "$MODEL_DIR").bin"
  # The same weights for whisper.cpp, at OpenAI's ids; the printed range is what it must suppress.
  SUPPRESS=$("$PARLANCE" convert "$MODEL_DIR" --to whispercpp --openai-ids -o "$MODEL" 2>/dev/null |
             sed -n 's/^suppress-ids //p')
  # Both sides decode with the model's default beam size (what the server's requests get).
  BEAMS=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("num_beams") or 1)' \
          "$MODEL_DIR/generation_config.json" 2>/dev/null || echo 1)
  if [ -z "$FILE" ]; then
    FILE="$B/bundled-long-cut.wav"
    python3 - "$ROOT/models/parlance-synth-en/samples/long.wav" "$FILE" <<'PY'
import sys, wave, array
r = wave.open(sys.argv[1]); rate = r.getframerate(); pcm = array.array("h", r.readframes(r.getnframes()))
win = rate // 10  # the quietest 100 ms between 35 and 50 s, cut in its middle
best = min(range(35 * rate, min(50 * rate, len(pcm) - win), win // 4),
           key=lambda i: sum(x * x for x in pcm[i:i + win]))
w = wave.open(sys.argv[2], "wb"); w.setnchannels(1); w.setsampwidth(2); w.setframerate(rate)
w.writeframes(pcm[:best + win // 2].tobytes()); w.close()
PY
  fi
else
  MODEL="$CACHE/bench/$LAYOUT.bin"
  SERVED="$MODEL"
  [ -f "$MODEL" ] || { echo "no $MODEL: run bench/run.sh first" >&2; exit 1; }
fi
[ -n "$FILE" ] || FILE="$ROOT/tests/fixtures/audio/jfk.wav"
# WHISPER_CPP_SERIAL: an anchor built elsewhere (the GPU machine's, scripts/device_cuda_check.sh).
SERIAL="${WHISPER_CPP_SERIAL:-$B/whisper_cpp_serial}"
if [ -z "${WHISPER_CPP_SERIAL:-}" ]; then
  { cmake -S "$ROOT/bench" -B "$B" && cmake --build "$B" --target whisper_cpp_serial -j1; } >"$B.serial.build.log" 2>&1 ||
    { tail -20 "$B.serial.build.log"; exit 1; }
fi
OUTF="$B/serve-$(date +%Y%m%d-%H%M%S).jsonl"
log() { printf '[serve-bench] %s\n' "$*" >&2; }
log "load before: $(uptime | sed 's/.*load average: //')"

max_level=$(tr ' ' '\n' <<<"$LEVELS" | sort -n | tail -1)
slots=$((2 * BEAMS * max_level))
LOGF="$B/serve.log"
log "file $(basename "$FILE"), beams $BEAMS, device $DEVICE${SUPPRESS:+, whisper.cpp suppresses ids $SUPPRESS}"
"$PARLANCE" serve --model "$SERVED" --device "$DEVICE" --port 0 --threads "$THREADS" --cache-slots "$slots" \
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
text = json.load(open("$RES_DIR/r1.json"))["text"]
print(json.dumps({"tool": "parlance serve", "concurrency": c, "threads": threads, "requests": n,
                  "audio_seconds": audio, "wall_ms": (t1 - t0) * 1000,
                  "request_ms": [float(r[0]) * 1000 for r in rows], "tokens": [int(r[1]) for r in rows],
                  "text": text}))
PY
  log "concurrency $C: $N requests in $(python3 -c "print(round($t1-$t0,2))") s"
done
kill $SERVER; wait $SERVER 2>/dev/null || true; trap - EXIT

N=$((PER * 4))
log "whisper.cpp serial: $N requests"
GPU=0; [ "$DEVICE" = cpu ] || GPU=1
# Flash attention off and on (on is whisper.cpp's default; ggml's CUDA build here has no FA kernels,
# so on the GPU "on" runs that op on the CPU): the faster of the two is the anchor.
for FA in 0 1; do
  "$SERIAL" --model "$MODEL" --file "$FILE" --threads "$THREADS" --requests "$N" --beam-size "$BEAMS" \
      ${SUPPRESS:+--suppress-ids "$SUPPRESS"} --gpu "$GPU" --flash-attn "$FA" >>"$OUTF" 2>>"$B/serial.log"
done
log "load after: $(uptime | sed 's/.*load average: //')"
log "results: $OUTF"
python3 - "$OUTF" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
anchors = [r for r in rows if r["tool"] == "whisper.cpp"]
anchor = max(anchors, key=lambda r: r["requests"] / r["wall_ms"])  # the faster run
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
    name = ("whisper.cpp (serial, flash attention %s)" % ("on" if r.get("flash_attn") else "off")
            if r["tool"] == "whisper.cpp" else "parlance serve")
    conc = "1 (in a row)" if r["tool"] == "whisper.cpp" else str(r["concurrency"])
    print("| %s | %s | %d | %.3f | %.2f | %.2f× | %.2f | %.2f | %.0f |" % (
        name, conc, r["requests"], thr, thr * r["audio_seconds"], thr / a_thr, p50 / 1000, p95 / 1000, tok))
print("\n(ratios against the faster whisper.cpp run)")
words = lambda t: " ".join("".join(c for c in t.lower() if c.isalnum() or c.isspace()).split())
ours = next(r for r in rows if r["tool"] != "whisper.cpp").get("text", "")
print("\nparlance:     %s\nwhisper.cpp:  %s\nsame words: %s" % (ours.strip(), anchor.get("text", "").strip(),
      "yes" if words(ours) == words(anchor.get("text", "")) else "no"))
PY
