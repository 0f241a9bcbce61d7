#!/usr/bin/env python3
"""Parity on a trained model: parlance's transcripts against transformers' on the same clips.

Takes the clips evaluate.py saved (--save-clips, .npz of int16 samples) and its report (the
transformers transcripts), runs `parlance transcribe` on each clip with the same decoding
(greedy, temperature 0 without fallback, no timestamps, English), and prints how many
transcripts are identical, the first differences, and the word error rate of both.
Pure Python + numpy; runs on the CPU machine.

  python3 tools/train/compare.py --parlance build/parlance --model models/NAME \
      --clips clips_seen.npz --report eval.json --set seen [--json out.json]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import wave

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from evaluate import wer  # noqa: E402  (same normalization and WER as the device side)


def write_wav(path, samples):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(samples.astype("<i2").tobytes())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parlance", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--clips", required=True)
    ap.add_argument("--report", required=True)
    ap.add_argument("--quantize", help="parlance's --quantize (f32: linear weights in float32, as transformers ran them)")
    ap.add_argument("--set", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", help="write the per-clip comparison here")
    args = ap.parse_args()

    rows = {r["id"]: r for r in json.load(open(args.report))["sets"][args.set]["rows"]}
    clips = np.load(args.clips)
    ids = [cid for cid in clips.files if cid in rows]
    out, same = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for cid in ids:
            paths.append(os.path.join(tmp, cid + ".wav"))
            write_wav(paths[-1], clips[cid])
        # One run for every clip (the model loads once); json output is one object per file, in order.
        res = subprocess.run([args.parlance, "transcribe", "-m", args.model, "--language", "en",
                              "--temperature", "0", "--no-timestamps", "-t", str(args.threads),
                              "-f", "json"] + (["--quantize", args.quantize] if args.quantize else []) + paths,
                             capture_output=True, text=True)
        if res.returncode != 0:
            sys.exit("parlance failed: %s" % res.stderr.strip())
    decoder, pos, texts = json.JSONDecoder(), 0, []
    while len(texts) < len(ids):
        while pos < len(res.stdout) and res.stdout[pos].isspace():
            pos += 1
        obj, pos = decoder.raw_decode(res.stdout, pos)
        texts.append(obj["text"].strip())
    for cid, ours in zip(ids, texts):
        ref = rows[cid]
        equal = ours == ref["hyp"].strip()
        same += equal
        out.append({"id": cid, "ref": ref["ref"], "transformers": ref["hyp"], "parlance": ours, "same": equal})
    n = len(out)
    w_t = wer([(r["ref"], r["transformers"]) for r in out])
    w_p = wer([(r["ref"], r["parlance"]) for r in out])
    print("set %s: %d clips, %d identical transcripts (%.1f%%)" % (args.set, n, same, 100.0 * same / max(1, n)))
    print("WER transformers %.2f%%  parlance %.2f%%  (%d reference words)" % (100 * w_t[0], 100 * w_p[0], w_t[2]))
    for r in [r for r in out if not r["same"]][:5]:
        print("  %s\n    transformers: %s\n    parlance:     %s" % (r["id"], r["transformers"], r["parlance"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"set": args.set, "clips": n, "identical": same, "wer_transformers": w_t[0],
                       "wer_parlance": w_p[0], "rows": out}, f, indent=1)
    return 0 if same == n else 1


if __name__ == "__main__":
    sys.exit(main())
