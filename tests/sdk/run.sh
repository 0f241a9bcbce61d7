#!/usr/bin/env bash
# Runs the OpenAI Node SDK compatibility test against a real `parlance serve`.
# Usage: tests/sdk/run.sh PARLANCE_BINARY FIXTURES_DIR
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
binary="$(realpath "$1")"; fixtures="$(realpath "$2")"
cd "$here"
# package-lock.json pins the SDK and its integrity hash; the registry is npm's.
[ -d node_modules/openai ] || npm ci --no-audit --no-fund --silent
log="$(mktemp)"
"$binary" serve --port 0 --threads 2 --max-new-tokens 24 --model "$fixtures/whisper/tiny-multi/model" >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -f "$log"' EXIT
port=""
for _ in $(seq 1 200); do
  port="$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$log" | grep -o '[0-9]*$' || true)"
  [ -n "$port" ] && curl -s "http://127.0.0.1:$port/health" | grep -q ok && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$log"; exit 1; }
PARLANCE_URL="http://127.0.0.1:$port" PARLANCE_CLIP="$fixtures/audio/jfk.wav" node --test openai_sdk.test.mjs
