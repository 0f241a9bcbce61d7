#!/usr/bin/env python3
"""Picks the bundled samples from an evaluation: held-out sentences (never in training) whose
transformers transcript matches the reference best (exactly, unless --max-wer allows errors), written as 16 kHz WAV files with a NAME.txt
reference beside each. One sample per --pick; `--join K` also writes one longer clip of K
sentences in a row (a recording past 30 s, so the demo shows windows and timestamps).

  python3 tools/train/make_samples.py --clips clips_heldout.npz --report eval-full.json \
      --set heldout --pick heldout_voice --out models/NAME/samples
  python3 tools/train/make_samples.py --clips clips_seen.npz --report eval-full.json \
      --set seen --pick seen_voice --join 10 --join-name long --out models/NAME/samples
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import write_wav  # noqa: E402
from evaluate import normalize, wer  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clips", required=True)
    ap.add_argument("--report", required=True)
    ap.add_argument("--set", required=True)
    ap.add_argument("--pick", action="append", default=[], help="name of a one-sentence sample")
    ap.add_argument("--join", type=int, default=0, help="sentences in the long sample (0: none)")
    ap.add_argument("--join-name", default="long")
    ap.add_argument("--min-words", type=int, default=6)
    ap.add_argument("--max-wer", type=float, default=0.0, help="per-clip WER of the transformers transcript")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    rows = json.load(open(args.report))["sets"][args.set]["rows"]
    clips = np.load(args.clips)
    # The clips transformers transcribed best (per-clip WER up to --max-wer), best first: the
    # samples show the pipeline working, the evaluation's table says how well the model does.
    scored = [(wer([(r["ref"], r["hyp"])])[0], i, r) for i, r in enumerate(rows)
              if r["id"] in clips.files and len(normalize(r["ref"])) >= args.min_words]
    good = [r for w, _, r in sorted(scored, key=lambda t: (t[0], t[1])) if w <= args.max_wer]
    need = len(args.pick) + args.join
    if len(good) < need:
        sys.exit("only %d clips of %d words or more with a WER up to %g; %d needed" % (
            len(good), args.min_words, args.max_wer, need))
    os.makedirs(args.out, exist_ok=True)
    for name, r in zip(args.pick, good):
        write_wav(os.path.join(args.out, name + ".wav"), clips[r["id"]])
        with open(os.path.join(args.out, name + ".txt"), "w") as f:
            f.write(r["ref"] + "\n")
        print("%s: %s (%s, %.1f s) -> %s" % (name, r["ref"], r["voice"], len(clips[r["id"]]) / 16000, r["hyp"]))
    if args.join:
        part = good[len(args.pick): len(args.pick) + args.join]
        audio = np.concatenate([clips[r["id"]] for r in part])  # each clip has 0.5 s of silence either side
        write_wav(os.path.join(args.out, args.join_name + ".wav"), audio)
        with open(os.path.join(args.out, args.join_name + ".txt"), "w") as f:
            f.write(" ".join(r["ref"] for r in part) + "\n")
        print("%s: %d sentences, %.1f s" % (args.join_name, len(part), len(audio) / 16000))


if __name__ == "__main__":
    main()
