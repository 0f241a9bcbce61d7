#!/usr/bin/env python3
"""Parity on a trained model: parlance's transcripts against transformers' on the same clips.

Takes the clips evaluate.py saved (--save-clips, .npz of int16 samples) and its report (the
transformers transcripts), runs `parlance transcribe` on each clip with the same decoding
(the report's beams, greedy when it does not say; temperature 0 without fallback, no timestamps,
no no-speech gate, English), and prints how many
transcripts are identical, the first differences, and the word error rate of both.
Pure Python + numpy; runs on the CPU machine.

  python3 tools/train/compare.py --parlance build/parlance --model models/NAME \
      --clips clips_seen.npz --report eval.json --set seen [--json out.json]
  python3 tools/train/compare.py --parlance build/parlance --model models/NAME --set nospeech

`--set nospeech` runs the evaluation's silence and noise clips with parlance's default decoding
(no-speech gate on) and counts those that give text; with `--report`, it also decodes them as
evaluate.py did and compares with transformers' transcripts.

`--join N` measures long audio instead: the clips joined N at a time (each has 0.5 s of silence
either side), transcribed by parlance as a user runs it (default decoding, with timestamps and
30-second windows; `--decoding="--beam-size 5"` adds options, the `=` needed), WER against the joined references.
transformers has no figure here (evaluate.py decodes clips one by one).

  python3 tools/train/compare.py --parlance build/parlance --model models/NAME \
      --clips clips_seen.npz --report eval.json --set seen --join 10 [--decoding="--beam-size 5"]
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
from evaluate import nospeech_clips, normalize, wer  # noqa: E402  (the device side's clips and WER)


def write_wav(path, samples):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(samples.astype("<i2").tobytes())


def transcribe(args, named_audio, extra):
    """parlance transcribe on every clip in one run (the model loads once); the texts in order."""
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for cid, audio in named_audio:
            paths.append(os.path.join(tmp, cid + ".wav"))
            write_wav(paths[-1], audio)
        res = subprocess.run([args.parlance, "transcribe", "-m", args.model, "-t", str(args.threads), "-f", "json"]
                             + extra + (["--quantize", args.quantize] if args.quantize else []) + paths,
                             capture_output=True, text=True)
        if res.returncode != 0:
            sys.exit("parlance failed: %s" % res.stderr.strip())
    decoder, pos, texts = json.JSONDecoder(), 0, []
    while len(texts) < len(named_audio):
        while pos < len(res.stdout) and res.stdout[pos].isspace():
            pos += 1
        obj, pos = decoder.raw_decode(res.stdout, pos)
        texts.append(obj["text"].strip())
    return texts


def nospeech(args):
    """The evaluation's no-speech clips (silence, white/pink/brown noise; made again here, they are
    seeded) through `parlance transcribe` as a user runs it: default decoding, with its no-speech
    gate. Counts the clips that give any text. With --report, also decodes them as evaluate.py
    did (its beams, temperature 0, no timestamps, no gate) and compares with transformers."""
    clips = nospeech_clips()
    texts = transcribe(args, [(c["id"], c["audio"]) for c in clips], [])
    with_text = [(c["id"], t) for c, t in zip(clips, texts) if normalize(t)]
    print("set nospeech: %d clips, %d with text %s" % (len(clips), len(with_text), with_text or ""))
    result = {"set": "nospeech", "clips": len(clips), "clips_with_text": len(with_text),
              "rows": [{"id": c["id"], "parlance": t} for c, t in zip(clips, texts)]}
    if args.report:
        report = json.load(open(args.report))
        theirs = {r["id"]: r["hyp"].strip() for r in report["sets"]["nospeech"]["rows"]}
        beams = report_beams(report, "nospeech")
        plain = transcribe(args, [(c["id"], c["audio"]) for c in clips], evaluation_decoding(beams))
        same = sum(theirs.get(c["id"]) == t for c, t in zip(clips, plain))
        print("  as evaluate.py decodes (%d beam(s), no timestamps, no gate): %d of %d identical to transformers, "
              "%d with text" % (beams, same, len(clips), sum(bool(normalize(t)) for t in plain)))
        for row, t in zip(result["rows"], plain):  # both in the clips' order
            row.update({"parlance_evaluation_decoding": t, "transformers": theirs.get(row["id"])})
        result.update({"num_beams": beams, "identical": same})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0 if not with_text and result.get("identical", len(clips)) == len(clips) else 1


def report_beams(report, name):
    """The beams evaluate.py decoded a set with (reports before it recorded them were greedy)."""
    beams = report["sets"][name].get("num_beams", report.get("num_beams")) or 1
    if isinstance(beams, list):
        sys.exit("set %s was decoded partly greedily (evaluate.py's fallback): beams %s" % (name, beams))
    return beams


def evaluation_decoding(beams):
    """parlance options for what evaluate.py runs: its beams, temperature 0 without fallback, no
    timestamps, no no-speech gate (evaluate.py sets none for generate()), English."""
    return ["--language", "en", "--temperature", "0", "--no-timestamps", "--no-speech-threshold", "1",
            "--beam-size", str(beams)]


def effective_beams(args):
    """The beams parlance decoded with: --beam-size in --decoding, else the model's default
    (generation_config.json num_beams, else 1)."""
    return beams_in(args.decoding) or model_beams(args.model)


def beams_in(decoding):
    """The N of `--beam-size N` or `--beam-size=N` in parlance options, else None."""
    opts = decoding.split()
    for k, o in enumerate(opts):
        if o == "--beam-size" and k + 1 < len(opts):
            return int(opts[k + 1])
        if o.startswith("--beam-size="):
            return int(o.split("=", 1)[1])
    return None


def model_beams(model_dir):
    """A model's default beams: generation_config.json num_beams (absent or null: 1)."""
    path = os.path.join(model_dir, "generation_config.json")
    return (json.load(open(path)).get("num_beams") or 1) if os.path.exists(path) else 1


def long_audio(args, rows, clips, ids):
    groups = [ids[i: i + args.join] for i in range(0, len(ids) - args.join + 1, args.join)]
    audio = [("long-%03d" % k, np.concatenate([clips[c] for c in g])) for k, g in enumerate(groups)]
    refs = [" ".join(rows[c]["ref"] for c in g) for g in groups]
    texts = transcribe(args, audio, args.decoding.split())
    w = wer(list(zip(refs, texts)))
    seconds = sum(len(a) for _, a in audio) / 16000 / max(1, len(audio))
    beams = effective_beams(args)
    print("set %s, %d files of %d clips joined (%.0f s each), decoding [%s], %d beam(s): WER parlance %.2f%% (%d words)" % (
        args.set, len(audio), args.join, seconds, args.decoding, beams, 100 * w[0], w[2]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"set": args.set, "join": args.join, "files": len(audio), "seconds": seconds,
                       "decoding": args.decoding, "num_beams": beams, "wer_parlance": w[0], "words": w[2],
                       "rows": [{"ref": r, "parlance": t} for r, t in zip(refs, texts)]}, f, indent=1)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parlance", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--clips", help="evaluate.py --save-clips NAME.npz (not for --set nospeech)")
    ap.add_argument("--report", help="evaluate.py's report (optional for --set nospeech: adds parity)")
    ap.add_argument("--quantize", help="parlance's --quantize (f32: linear weights in float32, as transformers ran them)")
    ap.add_argument("--set", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", help="write the per-clip comparison here")
    ap.add_argument("--join", type=int, default=0, help="long audio: clips joined N at a time (parlance only)")
    ap.add_argument("--decoding", default="", help="with --join: parlance options, e.g. --decoding=\"--beam-size 5\"")
    args = ap.parse_args()

    if args.set == "nospeech":
        return nospeech(args)
    if not args.clips or not args.report:
        ap.error("--clips and --report are needed for --set %s" % args.set)
    report = json.load(open(args.report))
    rows = {r["id"]: r for r in report["sets"][args.set]["rows"]}
    clips = np.load(args.clips)
    ids = [cid for cid in clips.files if cid in rows]
    if args.join:
        return long_audio(args, rows, clips, ids)
    out, same = [], 0
    beams = report_beams(report, args.set)
    texts = transcribe(args, [(cid, clips[cid]) for cid in ids], evaluation_decoding(beams))
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
            json.dump({"set": args.set, "clips": n, "identical": same, "num_beams": beams, "wer_transformers": w_t[0],
                       "wer_parlance": w_p[0], "rows": out}, f, indent=1)
    return 0 if same == n else 1


if __name__ == "__main__":
    sys.exit(main())
