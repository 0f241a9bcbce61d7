#!/usr/bin/env bash
# Streaming vs offline with the bundled model on held-out speech (issue 16; BENCHMARKS.md "Live
# transcription"): held-out sentences (tools/train/corpus.py's split) spoken by the held-out voice
# (flite rms, never in training), each clip through `parlance stream --lockstep`, the same session
# without interim decodes, and `parlance transcribe` (bench/stream_vs_offline.py says what each is).
# Usage: bench/stream_vs_offline.sh [--count N] [--voices heldout|seen-eval] [--redecode S] [--json F]
#        [--model PATH] [-- more parlance stream arguments]
# Needs: build/parlance (scripts/build.sh or the test build); fetches the synthesizers' .debs from
# Debian (tools/train/prepare.sh) and python3-numpy from apt the first time.
set -euo pipefail
cd "$(dirname "$0")/.."
count=100 voices=heldout redecode=0.6 json="" model=""
while (($#)); do
  case "$1" in
    --count) count="$2"; shift 2 ;;
    --voices) voices="$2"; shift 2 ;;
    --redecode) redecode="$2"; shift 2 ;;
    --json) json="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
/usr/bin/python3 -c "import numpy" 2>/dev/null || {
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-numpy >/dev/null
}
[ -f .train/synth.tar.xz ] && [ -f .train/corpus.tar.xz ] || bash tools/train/prepare.sh
work="${PARLANCE_CACHE:-$HOME/.cache/parlance}/bench/stream-eval"
clips="$work/$voices-$count"
if [ ! -f "$clips/meta.json" ]; then
  rm -rf "$work/synth" "$work/corpus"; mkdir -p "$work/synth"
  tar -xJf .train/synth.tar.xz -C "$work/synth"
  tar -xJf .train/corpus.tar.xz -C "$work"
  /usr/bin/python3 tools/train/synth.py --synth-root "$work/synth" --sentences "$work/corpus/heldout.txt" \
    --count "$count" --voices "$voices" --out "$clips" --jobs "$(nproc)" --seed 7
fi
/usr/bin/python3 bench/stream_vs_offline.py --parlance build/parlance --shards "$clips" --limit "$count" \
  --redecode "$redecode" ${json:+--json "$json"} ${model:+--model "$model"} -- "$@"
