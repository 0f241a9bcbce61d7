#!/usr/bin/env bash
# Installs, builds and runs parlance's main job on what a fresh machine has. parlance does not
# ship trained weights yet (a model of our own is being trained: see the issues), so this shows
# the model inventory and transcribes a real recording with a random-weight test checkpoint —
# the words are noise; the pipeline (decode, log-mel, encoder, decoder, timestamps, SRT) is real.
# Usage: scripts/run.sh [parlance transcribe arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DPARLANCE_TESTS=OFF >/dev/null
cmake --build build -j"$(nproc)" --target parlance
if [ $# -gt 0 ]; then exec ./build/parlance transcribe "$@"; fi
echo
echo "No trained model is bundled yet: pass --model PATH (a Whisper HF snapshot directory or a"
echo "whisper.cpp .bin file) to transcribe for real. Meanwhile, on a test checkpoint:"
echo
./build/parlance info tests/fixtures/whisper/tiny-en/model
echo
./build/parlance transcribe tests/fixtures/audio/jfk.wav --model tests/fixtures/whisper/tiny-en/model -f srt
