#!/usr/bin/env bash
# What each device call runs (the `run` tool; carry .train). Two calls, back to back, while the
# machine stays warm:
#
#   bash tools/train/device_call.sh start     # smoke test; if it passes, the full run starts in
#                                             # the background (setsid); then waits ~9 minutes
#   bash tools/train/device_call.sh collect   # waits for the end (up to ~9.5 minutes), copies the
#                                             # results to $OUT (7 files, each < 16 MiB)
#
# A third `collect` picks up a run that needs longer. Progress is the tail of WORK/out/run.log.
set -uo pipefail
cd "$(dirname "$0")/../.."
W=${TRAIN_WORK:-/tmp/train}
export PYTHONUNBUFFERED=1
progress() { grep -v '^synth:\|transformers\]\|Loading weights\|Writing model' "$W/out/run.log" 2>/dev/null | tail -"${1:-15}"; }

case "${1:-}" in
start)
    nvidia-smi --query-gpu=name,memory.used --format=csv,noheader || true
    rm -rf "$W/out" "$W"/DONE-* "$W"/EXIT-*
    if ! bash tools/train/device_run.sh "$W" smoke >/dev/null 2>&1; then
        echo "smoke run failed:"; progress 60; exit 1
    fi
    progress 12
    setsid nohup bash tools/train/device_run.sh "$W" full >/dev/null 2>&1 </dev/null &
    for _ in $(seq 108); do [ -e "$W/EXIT-full" ] && break; sleep 5; done
    progress 12
    ;;
collect)
    for _ in $(seq 114); do [ -e "$W/EXIT-full" ] && break; sleep 5; done
    progress 25
    if [ ! -e "$W/EXIT-full" ]; then echo "still running: call collect again"; exit 3; fi
    if [ ! -e "$W/DONE-full" ]; then echo "the full run failed (status $(cat "$W/EXIT-full"))"; exit 1; fi
    mkdir -p "${OUT:?}"
    cp "$W/out/run.log" "$W/out/training-full.json" "$W/out/eval-full.json" "$W/out/clips_seen.npz" \
       "$W/out/clips_heldout.npz" \
       "$W"/out/model.tar.part-* "$OUT"/
    ls -la "$OUT"
    ;;
*)
    echo "usage: device_call.sh start|collect" >&2; exit 2 ;;
esac
