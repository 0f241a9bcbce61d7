#!/usr/bin/env bash
# End-to-end test of the web page at "/" in headless Chromium (Debian's /usr/bin/chromium, driven
# by playwright-core): a fake microphone plays a recording of the bundled model's two sample clips
# with pauses, the page streams it through its AudioWorklet to /v1/realtime, and the test checks
# what the page shows (page.test.mjs).
# Usage: tests/browser/run.sh PARLANCE_BINARY
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
binary="$(realpath "$1")"
samples="$here/../../models/parlance-synth-en/samples"
command -v chromium >/dev/null || { echo "chromium is not installed (scripts/setup.sh installs it)"; exit 1; }
cd "$here"
# package-lock.json pins playwright-core and its integrity hash; it drives the system's Chromium
# and never downloads a browser.
[ -d node_modules/playwright-core ] || npm ci --no-audit --no-fund --silent
work="$(mktemp -d)"
log="$work/serve.log"
# seen_voice, 1.5 s of silence, heldout_voice, 3 s of silence (server VAD ends the last item), at
# 48 kHz as a sound card delivers it.
ffmpeg -v error -i "$samples/seen_voice.wav" -f lavfi -t 1.5 -i anullsrc=r=16000:cl=mono -i "$samples/heldout_voice.wav" \
  -f lavfi -t 3 -i anullsrc=r=16000:cl=mono -filter_complex "[0:a][1:a][2:a][3:a]concat=n=4:v=0:a=1" \
  -ar 48000 -ac 1 -c:a pcm_s16le "$work/clip.wav"
"$binary" serve --port 0 --threads 2 >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"' EXIT
port=""
for _ in $(seq 1 300); do
  port="$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$log" | grep -o '[0-9]*$' || true)"
  [ -n "$port" ] && curl -s "http://127.0.0.1:$port/health" | grep -q ok && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
[ -n "$port" ] || { cat "$log"; exit 1; }
PARLANCE_URL="http://127.0.0.1:$port" PARLANCE_CLIP="$work/clip.wav" \
  PARLANCE_CLIP_PARTS="$samples/seen_voice.wav:$samples/heldout_voice.wav" \
  node --test page.test.mjs || { echo "-- server log"; tail -40 "$log"; exit 1; }
