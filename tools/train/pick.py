#!/usr/bin/env python3
"""Picks one of several trained models by its final held-out probe (train.py --probe): the lowest
decoder loss on held-out sentences, which only falls when the model listens. The chosen folder is
moved to --out; its training.json gains a "candidates" list with every run's figures. Runs that
did not finish (no training.json) are skipped; none finished is an error.

  python3 tools/train/pick.py --out model model.a model.b
"""
import argparse
import json
import math
import os
import shutil
import sys


def score(record):
    probes = [p for p in record.get("probes", []) if p.get("final")] or record.get("probes", [])
    loss, probe = (probes[-1]["loss"], probes[-1]) if probes else (record.get("final_loss", float("inf")), None)
    # A diverged run (NaN) must never compare as the best.
    return (loss if isinstance(loss, (int, float)) and math.isfinite(loss) else float("inf")), probe


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("candidates", nargs="+")
    args = ap.parse_args()
    runs = []
    for folder in args.candidates:
        path = os.path.join(folder, "training.json")
        if not os.path.exists(path):
            print("pick: %s did not finish" % folder, flush=True)
            continue
        record = json.load(open(path))
        loss, probe = score(record)
        a = record["args"]
        runs.append({"folder": folder, "loss": loss, "record": record,
                     "summary": {"name": os.path.basename(folder), "lr": a["lr"], "batch": a["batch"],
                                 "p_corrupt": a.get("p_corrupt"), "ctc_weight": a.get("ctc_weight"),
                                 "seed": a["seed"], "steps": record["steps"], "final_loss": record["final_loss"],
                                 "final_probe": probe}})
    if not runs:
        sys.exit("pick: no training run finished")
    best = min(runs, key=lambda r: r["loss"])
    for r in runs:
        print("pick: %-10s held-out probe loss %.4f%s" % (r["summary"]["name"], r["loss"],
                                                           "  <- chosen" if r is best else ""), flush=True)
    if os.path.exists(args.out):
        shutil.rmtree(args.out)
    shutil.move(best["folder"], args.out)
    record = best["record"]
    record["chosen"] = best["summary"]["name"]
    record["candidates"] = [r["summary"] for r in runs]
    with open(os.path.join(args.out, "training.json"), "w") as f:
        json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
