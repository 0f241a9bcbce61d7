#!/usr/bin/env bash
# Runs the OpenAI and Anthropic Node SDK compatibility tests against a real `parlance serve` over
# TLS (HTTPS and WSS with a certificate made here for localhost, trusted through
# NODE_EXTRA_CA_CERTS), including the OpenAI SDK's realtime client in a v6 and a v7 release.
# Usage: tests/sdk/run.sh PARLANCE_BINARY FIXTURES_DIR WRITE_QWEN3_FIXTURE
# The chat side serves the tiny random Qwen3 (tests/fixtures/qwen3/tiny, written by the tests'
# writer) with the real Qwen3 tokenizer and chat template.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
binary="$(realpath "$1")"; fixtures="$(realpath "$2")"; writer="$(realpath "$3")"
cd "$here"
# package-lock.json pins the SDKs and their integrity hashes; the registry is npm's.
[ -d node_modules/openai ] && [ -d node_modules/@anthropic-ai/sdk ] && [ -d node_modules/openai-v6 ] &&
  [ -d node_modules/openai-v7 ] && [ -d node_modules/ws ] || npm ci --no-audit --no-fund --silent
log="$(mktemp)"
chat="$(mktemp -d)"
"$writer" tiny "$chat/qwen3" >/dev/null
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost -addext subjectAltName=DNS:localhost \
  -keyout "$chat/key.pem" -out "$chat/cert.pem" 2>/dev/null
"$binary" serve --port 0 --tls-cert "$chat/cert.pem" --tls-key "$chat/key.pem" --threads 2 --max-new-tokens 24 --model "$fixtures/whisper/tiny-multi/model" \
  --chat-model "$chat/qwen3" --chat-model-id qwen3-tiny >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$log" "$chat"' EXIT
port=""
for _ in $(seq 1 200); do
  port="$(grep -o 'listening on https://127.0.0.1:[0-9]*' "$log" | grep -o '[0-9]*$' || true)"
  [ -n "$port" ] && curl -s --cacert "$chat/cert.pem" "https://localhost:$port/health" | grep -q ok && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$log"; exit 1; }
NODE_EXTRA_CA_CERTS="$chat/cert.pem" PARLANCE_URL="https://localhost:$port" PARLANCE_CLIP="$fixtures/audio/jfk.wav" \
  node --test openai_sdk.test.mjs anthropic_sdk.test.mjs realtime_sdk.test.mjs
