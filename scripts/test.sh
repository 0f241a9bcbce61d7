#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine needs, builds parlance, and runs every test:
#   1. the Release build: unit, golden (transformers parity) and black-box CLI tests;
#   2. the unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer (clang);
#   3. each libFuzzer target for a short run (FUZZ_SECONDS, default 20).
# Usage: scripts/test.sh     (CI runs this through .ci/run)
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS="${JOBS:-$(nproc)}"
# Each phase's wall time, printed as it ends and summed up at the end (CI's budget is ~40 minutes).
T0=$SECONDS T_PHASE=$SECONDS TIMES=""
phase() {
  TIMES+="$(printf '%-28s %5ss' "$1" $((SECONDS - T_PHASE)))\n"
  echo "-- $1: $((SECONDS - T_PHASE)) s"
  T_PHASE=$SECONDS
}
FUZZ_SECONDS="${FUZZ_SECONDS:-15}"

bash scripts/setup.sh
phase setup

echo "== Release build"
# Unity builds (CMake joins each target's sources eight to a file): the heavy headers (Beast,
# nlohmann, GoogleTest, CLI11) are parsed and their templates instantiated once per eight files,
# not once per file. In a fresh clone on this project's 2-core machine (2026-12-03): the Release
# build 706 -> 422 s, the ASan build 1339 -> 771 s, the whole run 3685 -> 2701 s.
UNITY=(-DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=8)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${UNITY[@]}" >/dev/null
cmake --build build -j"$JOBS"
phase "Release build"
echo "== Tests (Release)"
# One test at a time: each test's ggml graphs already use both cores, and oversubscribed
# OpenMP threads spin against each other.
ctest --test-dir build --output-on-failure -j1
phase "Release tests"

echo "== ASan+UBSan build (clang) with fuzz targets"
# Line tables are all a sanitizer report needs (file:line in every frame); full debug info made
# the build about a quarter slower.
cmake -S . -B build-asan -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only -DNDEBUG" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only -DNDEBUG" -DPARLANCE_SANITIZE=ON -DPARLANCE_FUZZ=ON "${UNITY[@]}" >/dev/null
cmake --build build-asan -j"$JOBS"
phase "ASan+UBSan build"
# Left out under ASan: the tests labelled slow (each ran in the Release pass above; which and why:
# tests/CMakeLists.txt).
echo "== Tests (ASan+UBSan): unit tests, the hardening suite, the cheaper black-box chat routes"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j1 -LE slow

phase "ASan+UBSan tests"
echo "== Fuzzing, ${FUZZ_SECONDS}s per target"
source "${PARLANCE_CACHE:-$HOME/.cache/parlance}/env"
export PARLANCE_ASSETS
for target in build-asan/tests/fuzz_*; do
  [ -x "$target" ] || continue
  corpus="$(mktemp -d)"
  # Each target starts from its own seeds (tests/fuzz/seeds/<target>/: the cases a hostile client
  # sent, issue 50); the audio decoder from the test recordings.
  name="$(basename "$target")"
  if [ -d "tests/fuzz/seeds/$name" ]; then
    cp "tests/fuzz/seeds/$name"/* "$corpus/"
  else
    cp tests/fixtures/audio/*.wav "$corpus/" 2>/dev/null || true
  fi
  echo "-- $name"
  "$target" -max_total_time="$FUZZ_SECONDS" -max_len=65536 -rss_limit_mb=2048 "$corpus" 2>&1 | tail -3
  rm -rf "$corpus"
done
phase fuzzing
printf '%b' "$TIMES"
echo "total $((SECONDS - T0)) s"
echo "all tests passed"
