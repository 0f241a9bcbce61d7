#!/usr/bin/env bash
# Qwen3-ASR's layouts at full width with random weights from the tests' generator — 0.6B (audio 18
# layers x 896 wide, 14 heads, 3584 MLP; text 28 x 1024, 16/8 heads of 128, 3072 MLP) and 1.7B
# (audio 24 x 1024, 16 heads, 4096 MLP; text 28 x 2048, 16/8 heads of 128, 6144 MLP), 480 conv
# channels, tied 151,936-row embedding — written once per text-weight type as llama.cpp's GGUF pair
# (f16 or q8_0 text model, f16 mmproj: byte for byte what the bundle's converter writes), then
# transcribed by parlance and by llama.cpp's llama-mtmd-cli from the pinned bundle, on the same
# files, the same threads, in one run. Clips of 10 s and 30 s (from tests/fixtures/audio/jfk.wav);
# each program loads the pair, encodes the clip and decodes exactly --tokens tokens (greedy, no
# early stop). Per phase, from each program's own timers (parlance `transcribe --timings`,
# llama.cpp's "slice encoded in" and llama_perf lines): the audio encoder, the prompt steps, decode
# ms/token; and the whole process's wall time and peak RSS (GNU time). One warm-up run each, then
# the two programs in turn --reps times; medians, and the median of the pairwise ratios. Both
# keep the decoder's KV cache in the same type (--kv: parlance --kv-cache-type, llama.cpp -ctk/-ctv;
# f16 by default: llama.cpp's default, and what both take; f32 is parlance's own). Beside
# every pair of runs, the same threads read the text model's tensor bytes once
# (bench/read_floor.cpp, best of 5): the floor under any exact decode step of one sequence,
# which reads every weight once whatever the program; the table gives it and llama.cpp's decode
# over it (below 1.25x, a decode 0.8x llama.cpp's would be under the floor).
# Usage: bench/qwen3_asr_bench.sh [--sizes "0.6b 1.7b"] [--types "f16 q8_0"] [--threads "1 2"]
#                                 [--kv "f16 f32"] [--tokens 33] [--reps 3]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${PARLANCE_CACHE:-$HOME/.cache/parlance}"
TOKENS=33; THREADS="1 2"; REPS=3; SIZES="0.6b"; TYPES="f16"; KVS="f16"
while [ $# -gt 0 ]; do
  case "$1" in
    --tokens) TOKENS="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --reps) REPS="$2"; shift 2 ;;
    --sizes) SIZES="$2"; shift 2 ;;
    --types) TYPES="$2"; shift 2 ;;
    --kv) KVS="$2"; shift 2 ;;
    *) echo "bench/qwen3_asr_bench.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
log() { printf '[qwen3-asr-bench] %s\n' "$*" >&2; }
# GNU time (peak RSS) and ninja (llama.cpp's build) from Debian when missing.
if [ ! -x /usr/bin/time ] || ! command -v ninja >/dev/null; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends time ninja-build >/dev/null
fi
B="$ROOT/build"
log "building parlance and write_qwen3_fixture (Release, $B)"
cmake -S "$ROOT" -B "$B" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$B" --target parlance write_qwen3_fixture -j"${JOBS:-$(nproc)}" >/dev/null
MTMD="$(bash "$ROOT/bench/build_llama_bench.sh" llama-mtmd-cli)"
g++ -std=c++20 -O2 -march=native -pthread "$ROOT/bench/read_floor.cpp" -o "$B/read_floor"
# The text model's dimensions per size (the audio encoder's and the projector's output follow).
layout_of() {
  case "$1" in
    0.6b) echo '{"audio_config":{"d_model":896,"encoder_layers":18,"encoder_attention_heads":14,"encoder_ffn_dim":3584,
"downsample_hidden_size":480,"output_dim":1024},"text_config":{"hidden_size":1024,"intermediate_size":3072,
"num_hidden_layers":28,"num_attention_heads":16,"num_key_value_heads":8,"head_dim":128}}' ;;
    1.7b) echo '{"audio_config":{"d_model":1024,"encoder_layers":24,"encoder_attention_heads":16,"encoder_ffn_dim":4096,
"downsample_hidden_size":480,"output_dim":2048},"text_config":{"hidden_size":2048,"intermediate_size":6144,
"num_hidden_layers":28,"num_attention_heads":16,"num_key_value_heads":8,"head_dim":128}}' ;;
    *) echo "bench/qwen3_asr_bench.sh: --sizes takes 0.6b and 1.7b, not '$1'" >&2; exit 2 ;;
  esac
}
# The pair's folder; written on first use. The writer's version is part of the name, so a cached
# pair from an older writer is not reused.
pair_of() {  # SIZE TYPE
  local stamp; stamp="$(sha256sum "$B/tests/write_qwen3_fixture" | cut -c1-12)"
  local dir="$CACHE/bench/qwen3-asr-$1-$2-$stamp"
  if [ ! -f "$dir/mmproj.gguf" ]; then
    log "writing the $1 layout as a $2 GGUF pair into $dir"
    rm -rf "$CACHE/bench/qwen3-asr-$1-$2-"*
    "$B/tests/write_qwen3_fixture" asr:layout-0.6b "$dir" --gguf "--$2" --edit "$(layout_of "$1")" >/dev/null
  fi
  echo "$dir"
}
CLIPS="$CACHE/bench/qwen3-asr-clips"
mkdir -p "$CLIPS"
python3 - "$ROOT/tests/fixtures/audio/jfk.wav" "$CLIPS" <<'PY'
import sys, wave
src, out = sys.argv[1], sys.argv[2]
with wave.open(src) as w:
    rate, frames = w.getframerate(), w.readframes(w.getnframes())
for seconds in (10, 30):
    need = seconds * rate * 2
    data = (frames * (need // len(frames) + 1))[:need]
    with wave.open(f"{out}/clip{seconds}.wav", "wb") as o:
        o.setnchannels(1); o.setsampwidth(2); o.setframerate(rate); o.writeframes(data)
PY

# One run: "WALL_S PEAK_KIB ENCODE_MS PREFILL_TOKENS PREFILL_MS DECODE_MS_PER_TOKEN", the phases
# read from the program's own stderr.
timed() {  # TOOL COMMAND...
  local tool="$1"; shift
  local rc=0
  /usr/bin/time -f "%e %M" -o "$CLIPS/time.txt" "$@" >/dev/null 2>"$CLIPS/stderr.txt" || rc=$?
  if [ "$rc" != 0 ]; then
    # Said, not swallowed: the table stops at the row that could not be measured.
    local what="$tool"; [ "$tool" = llama ] && what="the anchor, llama-mtmd-cli,"
    { echo "bench/qwen3_asr_bench.sh: $what failed (exit status $rc$( [ "$rc" -gt 128 ] && echo ": signal $((rc - 128))"))"
      echo "  command: $*"; echo "  its last lines:"; tail -5 "$CLIPS/stderr.txt" | sed 's/^/    /'; } >&2
    exit 1
  fi
  python3 - "$tool" "$CLIPS/time.txt" "$CLIPS/stderr.txt" <<'PY'
import re, sys
tool, wall_rss, err = sys.argv[1], open(sys.argv[2]).read().split(), open(sys.argv[3], errors="replace").read()
if tool == "parlance":
    m = re.search(r"encode ([\d.]+) ms, prefill (\d+) tokens ([\d.]+) ms, decode \d+ tokens [\d.]+ ms \(([\d.]+) ms/token\)", err)
    enc, ptok, pms, dec = float(m[1]), int(m[2]), float(m[3]), float(m[4])
else:
    # Each media chunk's encoder pass, then its embeddings' decode (the audio part of the prompt;
    # llama.cpp does not time its few text-prompt tokens apart from them).
    enc = sum(float(x) for x in re.findall(r"(?:batch encoding done|slice encoded) in (\d+) ms", err))
    pms = sum(float(x) for x in re.findall(r"decoded \(batch \d+/\d+\) in (\d+) ms", err))
    ptok = int(re.search(r"prompt eval time =\s*[\d.]+ ms /\s*(\d+) tokens", err)[1])
    dec = float(re.search(r" eval time =\s*[\d.]+ ms /\s*\d+ runs\s*\(\s*([\d.]+) ms per token", err)[1])
print(wall_rss[0], wall_rss[1], enc, ptok, pms, dec)
PY
}
parlance_run() {  # PAIR THREADS CLIP TOKENS KV
  timed parlance "$B/parlance" transcribe --model "$1" --threads "$2" --max-new-tokens "$4" --min-new-tokens "$4" \
    --kv-cache-type "$5" --timings --format json "$3"
}
mtmd_run() {  # PAIR THREADS CLIP TOKENS KV (a prompt of the same shape: transcribe, greedy, no early stop)
  timed llama "$MTMD" -m "$1/model.gguf" --mmproj "$1/mmproj.gguf" --audio "$3" -p "Transcribe the audio." \
    -n "$4" --ignore-eos --temp 0 -t "$2" -ctk "$5" -ctv "$5" --no-warmup -c 4096 --perf -lv 4  # -lv 4: timings
}
# The text model's tensor bytes (`parlance info`'s dtype table): what one decode step reads.
weight_bytes() {  # MODEL.gguf
  "$B/parlance" info "$1" | awk 't == 0 && /^ *dtype +tensors +bytes/ {t = 1; next} t == 1 && NF == 3 {gsub(",", "", $3); s += $3; next}
                                 t == 1 {t = 2} END {printf "%d", s}'
}
# The floor under a decode step: the same threads reading those bytes once (bench/read_floor.cpp),
# best of 5 passes, measured beside every pair of runs.
floor_ms() {  # BYTES THREADS
  "$B/read_floor" "$1" "$2" 5 | python3 -c 'import json, sys; print(json.load(sys.stdin)["best_ms"])'
}
echo "| layout | text weights | KV cache | threads | clip | encode ms (parlance / llama.cpp) | ratio | prompt steps ms (tokens) | decode ms/token | ratio | weights read once ms | llama.cpp decode / that | whole run s | ratio | peak RSS MiB |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for size in $SIZES; do
  for type in $TYPES; do
    M="$(pair_of "$size" "$type")"
    BYTES="$(weight_bytes "$M/model.gguf")"
    for kv in $KVS; do
    for th in $THREADS; do
      for clip in 10 30; do
        parlance_run "$M" "$th" "$CLIPS/clip$clip.wav" "$TOKENS" "$kv" >/dev/null  # warm-up: the files in the page cache
        mtmd_run "$M" "$th" "$CLIPS/clip$clip.wav" "$TOKENS" "$kv" >/dev/null
        rows=()
        for _ in $(seq 1 "$REPS"); do  # in turn, so a drift of the machine's speed hits both
          # One assignment each: a failing run's status is not masked by the next substitution's.
          ours="$(parlance_run "$M" "$th" "$CLIPS/clip$clip.wav" "$TOKENS" "$kv")"
          theirs="$(mtmd_run "$M" "$th" "$CLIPS/clip$clip.wav" "$TOKENS" "$kv")"
          floor="$(floor_ms "$BYTES" "$th")"
          rows+=("$ours $theirs $floor")
        done
        printf '%s\n' "${rows[@]}" | python3 -c '
import statistics, sys
size, wtype, th, clip, kv = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
r = [list(map(float, l.split())) for l in sys.stdin if l.strip()]
med = lambda i: statistics.median(x[i] for x in r)
ratio = lambda i: statistics.median(x[i] / x[i + 6] for x in r)
print(f"| {size} | {wtype} | {kv} | {th} | {clip} s | {med(2):.0f} / {med(8):.0f} | **{ratio(2):.2f}x** "
      f"| {med(4):.0f} ({med(3):.0f}) / {med(10):.0f} ({med(9):.0f}) | {med(5):.1f} / {med(11):.1f} | **{ratio(5):.2f}x** "
      f"| {med(12):.1f} | {statistics.median(x[11] / x[12] for x in r):.2f}x "
      f"| {med(0):.2f} / {med(6):.2f} | {ratio(0):.2f}x | {med(1) / 1024:.0f} / {med(7) / 1024:.0f} |")
' "$size" "$type" "$th" "$clip" "$kv"
      done
    done
    done
  done
done
