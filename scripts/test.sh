#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine needs, builds parlance, and runs every test:
#   1. the Release build: unit, golden (transformers parity) and black-box CLI tests;
#   2. the unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer (clang);
#   3. each libFuzzer target for a short run (FUZZ_SECONDS, default 20).
# Usage: scripts/test.sh     (CI runs this through .ci/run)
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS="${JOBS:-$(nproc)}"
FUZZ_SECONDS="${FUZZ_SECONDS:-20}"

bash scripts/setup.sh

echo "== Release build"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$JOBS"
echo "== Tests (Release)"
# One test at a time: each test's ggml graphs already use both cores, and oversubscribed
# OpenMP threads spin against each other.
ctest --test-dir build --output-on-failure -j1

echo "== ASan+UBSan build (clang) with fuzz targets"
cmake -S . -B build-asan -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPARLANCE_SANITIZE=ON -DPARLANCE_FUZZ=ON >/dev/null
cmake --build build-asan -j"$JOBS"
echo "== Tests (ASan+UBSan): unit tests and the server's hardening tests; the other black-box server/CLI runs, the memory bounds (hostile uploads, a ten-minute live stream: ASan's shadow memory and quarantine) the largest goldens (v3-layout, the 46-layer Qwen3-ASR layout: minutes under ASan) the quantized-GGUF comparison (four 150 MB files) and the two slowest engine runs (prompt-lookup drafts, constrained decoding over the whole vocabulary: their code is under ASan in Speculative.DraftModel* and StructuredOutput.*) ran above"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j1 \
    -E 'Serve[.]|Qwen3Quantized[.]|StructuredOutputEngine[.]|Speculative[.]SameTokens|ServeHardening[.]HostileUploads|Realtime[.]TenMinutes|Chat[.]LoadKeepsMemoryFlat|Transcribe[.]|OpenAiSdk|WhisperConvert|v3-layout|layout_06b'

echo "== Fuzzing, ${FUZZ_SECONDS}s per target"
source "${PARLANCE_CACHE:-$HOME/.cache/parlance}/env"
export PARLANCE_ASSETS
for target in build-asan/tests/fuzz_*; do
  [ -x "$target" ] || continue
  corpus="$(mktemp -d)"
  cp tests/fixtures/audio/*.wav tests/fuzz/seeds/* "$corpus/" 2>/dev/null || true
  echo "-- $(basename "$target")"
  "$target" -max_total_time="$FUZZ_SECONDS" -max_len=65536 -rss_limit_mb=2048 "$corpus" 2>&1 | tail -3
  rm -rf "$corpus"
done
echo "all tests passed"
