#!/usr/bin/env bash
# Installs, builds and runs parlance's main job on what a fresh machine has: the bundled model
# (models/parlance-synth-en, trained by tools/train) transcribes its samples. Without it (a
# checkout that left models/ out), a random-weight test checkpoint shows the pipeline instead.
# Usage: scripts/run.sh [parlance transcribe arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# A unity build (as scripts/test.sh: the heavy headers parsed once per eight files).
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DPARLANCE_TESTS=OFF -DCMAKE_UNITY_BUILD=ON >/dev/null
cmake --build build -j"$(nproc)" --target parlance
if [ $# -gt 0 ]; then exec ./build/parlance transcribe "$@"; fi
model=models/parlance-synth-en
if [ -f "$model/config.json" ]; then
    # The bundled model (no --model needed) on its samples: sentences and a voice it never heard
    # in training, then a recording longer than one 30 s window, as subtitles.
    ./build/parlance info "$model"
    for name in heldout_voice seen_voice; do
        echo
        echo "$model/samples/$name.wav — reference: $(cat "$model/samples/$name.txt")"
        ./build/parlance transcribe "$model/samples/$name.wav" -f text
    done
    echo
    echo "$model/samples/long.wav ($(cat "$model/samples/long.txt" | wc -w) words), as SRT:"
    ./build/parlance transcribe "$model/samples/long.wav" -f srt
    exit 0
fi
echo
echo "No trained model is bundled yet: pass --model PATH (a Whisper HF snapshot directory or a"
echo "whisper.cpp .bin file) to transcribe for real. Meanwhile, on a test checkpoint:"
echo
./build/parlance info tests/fixtures/whisper/tiny-en/model
echo
./build/parlance transcribe tests/fixtures/audio/jfk.wav --model tests/fixtures/whisper/tiny-en/model -f srt
