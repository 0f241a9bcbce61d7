#!/usr/bin/env bash
# Qwen3-ASR-0.6B's layout at full width (audio 18 layers x 896 wide, 14 heads, 3584 MLP, 480 conv
# channels; text 28 layers x 1024, 16/8 heads of 128, 3072 MLP, tied 151,936-row embedding) with
# random weights from the tests' generator, written once as llama.cpp's GGUF pair (f16 text model,
# f16 mmproj: byte for byte what the bundle's converter writes), then transcribed by parlance and
# by llama.cpp's llama-mtmd-cli from the pinned bundle, on the same files, the same threads, in one
# run. Clips of 10 s and 30 s (from tests/fixtures/audio/jfk.wav); each program loads the pair,
# encodes the clip and decodes exactly --tokens tokens (greedy, no early stop): the whole process's
# wall time and peak RSS (GNU time), after one warm-up run each, the two programs in turn --reps
# times, medians and the median of the pairwise ratios.
# Usage: bench/qwen3_asr_bench.sh [--tokens 33] [--threads "1 2"] [--reps 3]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${PARLANCE_CACHE:-$HOME/.cache/parlance}"
TOKENS=33; THREADS="1 2"; REPS=3
while [ $# -gt 0 ]; do
  case "$1" in
    --tokens) TOKENS="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --reps) REPS="$2"; shift 2 ;;
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
M="$CACHE/bench/qwen3-asr-0.6b-f16"
FULL='{"audio_config":{"d_model":896,"encoder_layers":18,"encoder_attention_heads":14,"encoder_ffn_dim":3584,
"downsample_hidden_size":480,"output_dim":1024},"text_config":{"hidden_size":1024,"intermediate_size":3072,
"num_hidden_layers":28,"num_attention_heads":16,"num_key_value_heads":8,"head_dim":128}}'
if [ ! -f "$M/mmproj.gguf" ]; then
  log "writing the 0.6B layout as an f16 GGUF pair into $M"
  "$B/tests/write_qwen3_fixture" asr:layout-0.6b "$M" --gguf --f16 --edit "$FULL" >/dev/null
fi
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

# wall seconds and peak RSS (KiB) of one command: "SECONDS KIB"
timed() { /usr/bin/time -f "%e %M" -o "$CLIPS/time.txt" "$@" >/dev/null 2>"$CLIPS/stderr.txt" || {
  tail -5 "$CLIPS/stderr.txt" >&2; exit 1; }; cat "$CLIPS/time.txt"; }
parlance_run() {  # THREADS CLIP TOKENS
  timed "$B/parlance" transcribe --model "$M" --threads "$1" --max-new-tokens "$3" --min-new-tokens "$3" \
    --format json "$2"
}
mtmd_run() {  # THREADS CLIP TOKENS (a prompt of the same shape: transcribe, greedy, no early stop)
  timed "$MTMD" -m "$M/model.gguf" --mmproj "$M/mmproj.gguf" --audio "$2" -p "Transcribe the audio." \
    -n "$3" --ignore-eos --temp 0 -t "$1" --no-warmup -c 4096
}
echo "| threads | clip | parlance s (RTF) | llama-mtmd-cli s (RTF) | parlance / llama.cpp | parlance peak RSS MiB | llama.cpp peak RSS MiB |"
echo "|---|---|---|---|---|---|---|"
for th in $THREADS; do
  for clip in 10 30; do
    parlance_run "$th" "$CLIPS/clip$clip.wav" "$TOKENS" >/dev/null  # warm-up: the files in the page cache
    mtmd_run "$th" "$CLIPS/clip$clip.wav" "$TOKENS" >/dev/null
    rows=()
    for _ in $(seq 1 "$REPS"); do  # in turn, so a drift of the machine's speed hits both
      rows+=("$(parlance_run "$th" "$CLIPS/clip$clip.wav" "$TOKENS") $(mtmd_run "$th" "$CLIPS/clip$clip.wav" "$TOKENS")")
    done
    printf '%s\n' "${rows[@]}" | python3 -c '
import statistics, sys
th, clip = sys.argv[1], int(sys.argv[2])
r = [list(map(float, l.split())) for l in sys.stdin if l.strip()]
p, pm, l, lm = (statistics.median(x[i] for x in r) for i in range(4))
ratio = statistics.median(x[0] / x[2] for x in r)
print(f"| {th} | {clip} s | {p:.2f} ({p / clip:.3f}) | {l:.2f} ({l / clip:.3f}) | {ratio:.2f}x | {pm / 1024:.0f} | {lm / 1024:.0f} |")
' "$th" "$clip"
  done
done
