#!/usr/bin/env bash
# What each device call runs (the `run` tool; carry .train). Two calls, back to back, while the
# machine stays warm:
#
#   bash tools/train/device_call.sh start     # the full run starts in the background (setsid)
#                                             # while a smoke run checks every step; waits ~9 min
#   bash tools/train/device_call.sh collect   # waits for the end (up to ~9.5 minutes), copies the
#                                             # results to $OUT (7 files, each < 16 MiB)
#
# A third `collect` picks up a run that needs longer. Progress is the tail of WORK/out/run.log.
# Continuing a model instead (tools/train/README.md): `continue` (one call, ~6 training minutes)
# or `start-continue` then `collect` calls (CONTINUE_MINUTES, 20 by default).
set -uo pipefail
cd "$(dirname "$0")/../.."
W=${TRAIN_WORK:-/tmp/train}
export PYTHONUNBUFFERED=1
# The model a continuation starts from, as $W/model-init: the tar parts of an earlier collect
# carried in .train/init, else the bundled models/parlance-synth-en (it travels with the tree).
prepare_init() {
    rm -rf "$W/model-init" "$W/init"
    if compgen -G ".train/init/model.tar.part-*" >/dev/null; then
        mkdir -p "$W/init" && cat .train/init/model.tar.part-* | tar -x -C "$W/init" &&
            mv "$W/init/model-full" "$W/model-init" || return 1
    else
        cp -r models/parlance-synth-en "$W/model-init" && rm -rf "$W/model-init/samples" || return 1
    fi
    rm -f "$W/model-init/training.json"
    echo "continuing from $([ -d "$W/init" ] && echo .train/init || echo models/parlance-synth-en)"
}
# Whatever of the run's results exists goes to $OUT (the call brings it back: at most 8 files).
return_results() {
    mkdir -p "${OUT:?}"
    for f in run.log training-full.json eval-full.json clips_seen.npz clips_heldout.npz clips_real.npz; do
        [ -e "$W/out/$f" ] && cp "$W/out/$f" "$OUT"/
    done
    cp "$W"/out/model.tar.part-* "$OUT"/ 2>/dev/null
    ls -la "$OUT"
}
# The smoke run (every step at toy scale, ~1.5 min) beside the full run's first minutes; if it
# fails, the full run is stopped and the call ends with the smoke run's log.
smoke_or_stop() {
    if ! bash tools/train/device_run.sh "$W" smoke >/dev/null 2>&1; then
        # The full run's own process group (it records it), whatever setsid did.
        [ -s "$W/PGID-full" ] && kill -- -"$(cat "$W/PGID-full")" 2>/dev/null
        echo "smoke run failed:"; tail -60 "$W/out/run-smoke.log"; exit 1
    fi
    echo "smoke run passed after ${SECONDS} s"
}
# A clean work folder with the synthesizers unpacked (every call that starts a run).
fresh_work() {
    rm -rf "$W/out" "$W"/DONE-* "$W"/EXIT-* "$W"/PGID-*
    bash tools/train/device_run.sh "$W" unpack >/dev/null || { echo "unpacking failed"; exit 1; }
}
# The environment under which device_run.sh continues $W/model-init for $1 minutes (unless
# CONTINUE_MINUTES says otherwise). Call it in a subshell: the smoke run must not inherit it.
continue_env() {
    export INIT="$W/model-init" TRAIN_MINUTES=${CONTINUE_MINUTES:-$1} MIN_UTTERANCES=${MIN_UTTERANCES:-6000}
    export TRAIN_ARGS="--lr ${CONTINUE_LR:-1e-3} --warmup 200 --batch ${CONTINUE_BATCH:-128}"
}
# The rest of a starting call: the smoke run, then the full run's progress until ~9 minutes.
smoke_then_wait() {
    smoke_or_stop
    while [ "$SECONDS" -lt 555 ] && [ ! -e "$W/EXIT-full" ]; do sleep 5; done
    progress 14
}
progress() { grep -v '^synth:\|transformers\]\|Loading weights\|Writing model' "$W/out/run.log" 2>/dev/null | tail -"${1:-15}"; }

case "${1:-}" in
start)
    nvidia-smi --query-gpu=name,memory.used --format=csv,noheader || true
    fresh_work
    # The full run starts at once (its synthesis needs minutes before training can begin); the
    # smoke run checks every step meanwhile and stops the full run if any fails.
    setsid nohup bash tools/train/device_run.sh "$W" full >/dev/null 2>&1 </dev/null &
    smoke_then_wait
    ;;
start-continue)
    # A longer continuation than one call holds: like `continue`, in the background like `start`
    # (with its smoke run), for CONTINUE_MINUTES (20); `collect` (twice, back to back) returns it.
    nvidia-smi --query-gpu=name,memory.used --format=csv,noheader || true
    fresh_work
    prepare_init || { echo "no model to continue"; exit 1; }
    (continue_env 20 && setsid nohup bash tools/train/device_run.sh "$W" full >/dev/null 2>&1 </dev/null &)
    smoke_then_wait
    ;;
collect)
    while [ "$SECONDS" -lt 560 ] && [ ! -e "$W/EXIT-full" ]; do sleep 5; done
    progress 25
    # Finished or not: a later collect can still fetch the rest.
    return_results
    if [ ! -e "$W/EXIT-full" ]; then echo "still running: call collect again"; exit 3; fi
    if [ ! -e "$W/DONE-full" ]; then echo "the full run failed (status $(cat "$W/EXIT-full"))"; exit 1; fi
    ;;
continue)
    # One call, back in under ten minutes: continue training a model for CONTINUE_MINUTES,
    # evaluate, return the results. The model: the tar parts of an earlier collect carried in
    # .train/init, else the bundled models/parlance-synth-en (it travels with the tree).
    # No smoke run (the recipe passed one with this train.py) and one training on the whole GPU.
    fresh_work
    prepare_init || { echo "no model to continue"; exit 1; }
    (continue_env 6 && EVAL_TIMEOUT=75 timeout "${CONTINUE_SECONDS:-560}" bash tools/train/device_run.sh "$W" full \
        >/dev/null 2>&1)
    echo "device_run ended with status $?"
    progress 25
    return_results
    [ -e "$W/DONE-full" ] || { echo "the continuation did not finish"; exit 1; }
    ;;
*)
    echo "usage: device_call.sh start|collect|continue|start-continue" >&2; exit 2 ;;
esac
