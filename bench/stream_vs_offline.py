#!/usr/bin/env python3
"""Streaming vs offline transcripts of the same audio (issue 16). Each clip goes through
  - a live session, `parlance stream --lockstep` (every re-decode at its cadence point, as on a
    machine that keeps up, so the result does not depend on this machine's speed): "stream";
  - the same session with no interim decodes (--redecode-seconds 1e9): each item's audio, as the
    server VAD cut it, decoded once: "once" — the offline transcript of exactly the audio the
    stream decoded, so stream != once only where the streaming decoder committed text early that
    the whole item's decode does not say;
  - `parlance transcribe` of the whole clip: "file" (its audio starts 0.5 s earlier and ends 1 s
    later than the item's: a weak model can say other words from that shift alone).
Words are compared case and punctuation aside; also reported: streams with a span sent twice (a
run of >= 3 words more often than in "once") or words dropped (words of "once" missing), and the
word error rate of each against the clip's text.

Clips come from tools/train/synth.py shards (NAME.i16 + NAME.jsonl): each utterance with 0.5 s of
silence before and 1 s after, as a speaker pausing between sentences.

  python3 bench/stream_vs_offline.py --parlance build/parlance --shards DIR [--limit N]
      [--redecode S] [--json out.json] [-- extra parlance stream arguments]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import wave

import numpy as np


def words(s):
    return re.sub(r"[^\w\s']", " ", s.lower()).split()


def read_clips(shards, limit):
    clips = []
    for name in sorted(os.listdir(shards)):
        if not name.endswith(".jsonl"):
            continue
        pcm = np.fromfile(os.path.join(shards, name[:-6] + ".i16"), dtype="<i2")
        with open(os.path.join(shards, name)) as f:
            for line in f:
                r = json.loads(line)
                clips.append((r["text"], pcm[r["offset"]: r["offset"] + r["samples"]]))
                if len(clips) >= limit:
                    return clips
    return clips


def write_wav(path, x):
    x = np.concatenate([np.zeros(8000, "<i2"), x, np.zeros(16000, "<i2")])
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(x.tobytes())


def stream(parlance, path, redecode, extra, model):
    out = subprocess.run([parlance, "stream", path, "--lockstep", "--threads", "2", "--redecode-seconds", str(redecode)]
                         + model + extra, capture_output=True, text=True, check=True).stdout
    items = [json.loads(m.group(1)) for m in re.finditer(r"completed in [0-9.]+ s after the end of speech: (\".*\")$",
                                                         out, re.M)]
    deltas = len(re.findall(r"^ +[0-9.]+ s +\S+ \+", out, re.M))
    first = re.search(r"first delta ([0-9.]+) s", out)
    return " ".join(t.strip() for t in items), len(items), deltas, float(first.group(1)) if first else None


def without(args, option):
    """args without `option VALUE` (a cadence that would give "once" interim decodes)."""
    out, skip = [], False
    for x in args:
        if skip:
            skip = False
        elif x == option:
            skip = True
        elif not x.startswith(option + "="):
            out.append(x)
    return out


def transcribe(parlance, path, model):
    return subprocess.run([parlance, "transcribe", path, "--threads", "2"] + model, capture_output=True, text=True,
                          check=True).stdout.strip()


def median(v):
    v = sorted(v)
    return v[len(v) // 2] if v else None


def errors(ref, hyp):
    """Word edit distance."""
    d = list(range(len(hyp) + 1))
    for i in range(1, len(ref) + 1):
        prev, d[0] = d[:], i
        for j in range(1, len(hyp) + 1):
            d[j] = min(prev[j] + 1, d[j - 1] + 1, prev[j - 1] + (ref[i - 1] != hyp[j - 1]))
    return d[len(hyp)]


def repeated_span(live, once, n=3):
    """A run of n words the stream has more often than `once` (a span sent twice)."""
    def grams(w):
        out = {}
        for i in range(len(w) - n + 1):
            g = tuple(w[i:i + n])
            out[g] = out.get(g, 0) + 1
        return out
    lg, og = grams(live), grams(once)
    return [" ".join(g) for g, c in lg.items() if c > 1 and c > og.get(g, 0)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parlance", required=True)
    ap.add_argument("--shards", required=True)
    ap.add_argument("--limit", type=int, default=100)
    ap.add_argument("--redecode", type=float, default=0.6)
    ap.add_argument("--json")
    ap.add_argument("--model", help="a model for all three runs (default: the bundled one)")
    ap.add_argument("extra", nargs="*", help="more `parlance stream` arguments (after --)")
    a = ap.parse_args()
    model = ["--model", a.model] if a.model else []
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for k, (text, pcm) in enumerate(read_clips(a.shards, a.limit)):
            path = os.path.join(tmp, "clip%04d.wav" % k)
            write_wav(path, pcm)
            live, items, deltas, first_delta = stream(a.parlance, path, a.redecode, a.extra, model)
            once, _, _, _ = stream(a.parlance, path, 1e9, without(a.extra, "--first-redecode-seconds"), model)
            offline = transcribe(a.parlance, path, model)
            lw, ow = words(live), words(once)
            dropped = [w for w in set(ow) if ow.count(w) > lw.count(w)]
            row = {"clip": k, "reference": text, "stream": live, "once": once, "file": offline, "items": items,
                   "deltas": deltas, "first_delta": first_delta, "equal": lw == ow, "equal_file": lw == words(offline),
                   "repeated": repeated_span(lw, ow), "dropped": sorted(dropped)}
            rows.append(row)
            mark = "=" if row["equal"] else "≠"
            print("%s %3d  stream: %s\n        once:   %s\n        file:   %s" % (mark, k, live, once, offline), flush=True)
    n = len(rows)
    ref_words = sum(len(words(r["reference"])) for r in rows)
    wer = {key: round(sum(errors(words(r["reference"]), words(r[key])) for r in rows) / max(ref_words, 1), 4)
           for key in ("stream", "once", "file")}
    summary = {"clips": n, "stream_equals_once": sum(r["equal"] for r in rows),
               "stream_equals_file": sum(r["equal_file"] for r in rows),
               "once_equals_file": sum(words(r["once"]) == words(r["file"]) for r in rows),
               "with_repeated_span": sum(bool(r["repeated"]) for r in rows),
               "with_dropped_words": sum(bool(r["dropped"]) for r in rows), "wer": wer,
               "first_delta_p50": median([r["first_delta"] for r in rows if r["first_delta"] is not None]),
               "redecode_seconds": a.redecode, "model": a.model, "extra": a.extra}
    print(json.dumps(summary))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"summary": summary, "clips": rows}, f, indent=1)


if __name__ == "__main__":
    main()
