#!/usr/bin/env bash
# The whole recipe on the GPU machine: unpack the synthesizers, speak the evaluation sets, speak
# training data in the background while training, export, evaluate with transformers, pack.
#
#   bash tools/train/device_run.sh WORK [smoke]
#
# `smoke` runs every step on a tiny scale (a few hundred utterances, 30 steps) in about a
# minute: the device call runs it first and starts the real run only when it passes.
# Results land in WORK/out (model parts, eval.json, clips, logs) and WORK/DONE marks the end.
# Parameters (the model card cites them): TRAIN_MINUTES, TRAIN_UTTERANCES, SYNTH_JOBS.
set -euo pipefail
cd "$(dirname "$0")/../.."
W=${1:?usage: device_run.sh WORK [smoke]}
MODE=${2:-full}
repo=$PWD
mkdir -p "$W/out"
rm -f "$W/EXIT-$MODE"
synth_pid=
# EXIT-MODE holds the status however the run ends, so a waiting call need not time out; a
# background synthesis does not outlive its run.
# (`if`, not `&&`: under set -e a failing kill after && would end the trap before it writes.)
trap 'rc=$?; if [ -n "$synth_pid" ]; then kill "$synth_pid" 2>/dev/null || true; fi; echo $rc >"$W/EXIT-$MODE"' EXIT
# This run's process group, for device_call.sh to stop it as a whole.
ps -o pgid= $$ | tr -d ' ' >"$W/PGID-$MODE"
# The full run logs to run.log (what `collect` returns), the others to run-MODE.log.
log="$W/out/run.log"
[ "$MODE" = full ] || log="$W/out/run-$MODE.log"
exec > >(tee -a "$log") 2>&1
echo "== $(date -u +%FT%TZ) device_run $MODE, commit $(git rev-parse --short HEAD 2>/dev/null || echo none)"

if [ "$MODE" = smoke ]; then
    minutes=1; steps=30; n_train=400; n_eval=24; min_utt=200; limit=24
else
    # Training starts once MIN_UTTERANCES exist (about 2-3 minutes of synthesis on 16 cores;
    # the first run started at 4000 and its model learned the sentences, not the sounds) and
    # synthesis continues while it trains.
    minutes=${TRAIN_MINUTES:-13}; steps=0; n_train=${TRAIN_UTTERANCES:-250000}; n_eval=400
    min_utt=${MIN_UTTERANCES:-12000}; limit=400
fi
jobs=$(nproc)
synth_jobs=${SYNTH_JOBS:-$((jobs > 4 ? jobs - 3 : 1))}

if [ ! -x "$W/synth/usr/bin/espeak-ng" ]; then
    mkdir -p "$W/synth"
    tar -C "$W/synth" -xJf .train/synth.tar.xz
    tar -C "$W" -xJf .train/corpus.tar.xz
fi
# festival looks for its library at the path it was built with.
[ -e /usr/share/festival ] || ln -sfn "$W/synth/usr/share/festival" /usr/share/festival
# `unpack` only prepares the synthesizers (device_call.sh does it once before two runs start).
[ "$MODE" = unpack ] && exit 0
python3 -c 'import torch, transformers, tokenizers; print("torch", torch.__version__, "transformers", transformers.__version__, "cuda", torch.cuda.is_available())'

D="$W/data-$MODE"
rm -rf "$D"
python3 tools/train/synth.py --synth-root "$W/synth" --sentences "$W/corpus/heldout.txt" --voices seen-eval \
    --count "$n_eval" --out "$D/eval_seen" --jobs "$jobs" --seed 11 | tail -1
python3 tools/train/synth.py --synth-root "$W/synth" --sentences "$W/corpus/heldout.txt" --voices heldout \
    --count "$n_eval" --out "$D/eval_heldout" --jobs "$jobs" --seed 12 | tail -1

# Every engine must work here: a failing synthesizer (a missing library) drops utterances.
python3 - "$D/eval_seen/meta.json" "$n_eval" <<'PY'
import json, sys
got = json.load(open(sys.argv[1]))["count"]
if got < 0.95 * int(sys.argv[2]):
    sys.exit("only %d of %s evaluation utterances were synthesized" % (got, sys.argv[2]))
PY
python3 tools/train/synth.py --synth-root "$W/synth" --sentences "$W/corpus/train.txt" --voices train \
    --count "$n_train" --out "$D/train" --jobs "$synth_jobs" --seed 1 --splice "${SPLICE:-0.5}" >"$W/out/synth-$MODE.log" 2>&1 &
synth_pid=$!
M="$W/model-$MODE"
rm -rf "$M" "$M".a "$M".b
# Two trainings share the GPU (one alone kept it ~4 % busy): the recipe's defaults, and a doubled
# learning rate, twice the input corruption and a heavier CTC loss, with another seed. The
# held-out probe at the end picks the one evaluated and shipped (pick.py); both runs' figures stay
# in its training.json.
# INIT (a saved model folder): continue training it, one run on the whole GPU, without the
# curriculum and the augmentation ramp it has been through already (TRAIN_ARGS adds options).
train=(python3 tools/train/train.py --data "$D/train" --corpus "$W/corpus" --minutes "$minutes"
       --steps "$steps" --min-utterances "$min_utt" --probe "$D/eval_seen"
       --probe-seconds "$([ "$MODE" = smoke ] && echo 20 || echo 90)")
if [ -n "${INIT:-}" ]; then
    train+=(--init "$INIT" --curriculum 0 --aug-ramp 0)
fi
# shellcheck disable=SC2206
train+=(${TRAIN_ARGS:-})
PYTHONUNBUFFERED=1 "${train[@]}" --out "$M.a" > >(sed -u 's/^/[a] /') 2>&1 &
pid_a=$!
runs=("$M.a")
if [ -z "${INIT:-}" ]; then
    PYTHONUNBUFFERED=1 "${train[@]}" --out "$M.b" --lr 3e-3 --seed 2 --p-corrupt 0.2 --ctc-weight 0.5 \
        > >(sed -u 's/^/[b] /') 2>&1 &
    pid_b=$!
    runs+=("$M.b")
    wait "$pid_b" || echo "training b failed (status $?)"
fi
wait "$pid_a" || echo "training a failed (status $?)"
python3 tools/train/pick.py --out "$M" "${runs[@]}"
# Training is over: what synthesis has not made yet is not needed.
kill "$synth_pid" 2>/dev/null || true
wait "$synth_pid" 2>/dev/null || true
tail -2 "$W/out/synth-$MODE.log"
cp "$M/training.json" "$W/out/training-$MODE.json"

# The model is packed first, so that it comes back even if the evaluation does not finish (the
# second run's evaluation stalled after two of its four sets). The device returns files of at
# most 16 MiB: the model travels as tar parts.
[ "$MODE" != smoke ] && tar -C "$W" -cf - "model-$MODE" | split -b 15m - "$W/out/model.tar.part-"
status=0
PYTHONUNBUFFERED=1 timeout "$([ "$MODE" = smoke ] && echo 300 || echo "${EVAL_TIMEOUT:-360}")" python3 tools/train/evaluate.py \
    --model "$M" --set seen="$D/eval_seen" --set heldout="$D/eval_heldout" --real .train/real \
    --limit "$limit" --out "$W/out/eval-$MODE.json" --save-clips "$W/clips-$MODE" || status=$?
if [ "$status" != 0 ]; then
    echo "evaluation failed or timed out (status $status)"
    [ "$MODE" = smoke ] && exit "$status"
fi
if [ "$MODE" != smoke ]; then
    cp "$W/clips-$MODE/seen.npz" "$W/out/clips_seen.npz" 2>/dev/null || true
    cp "$W/clips-$MODE/heldout.npz" "$W/out/clips_heldout.npz" 2>/dev/null || true
    cp "$W/clips-$MODE/real.npz" "$W/out/clips_real.npz" 2>/dev/null || true
fi
ls -la "$W/out"
touch "$W/DONE-$MODE"
echo "== $(date -u +%FT%TZ) done $MODE"
