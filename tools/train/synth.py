#!/usr/bin/env python3
"""Speaks corpus sentences with the synthesizers in Debian main, in parallel, into shards.

Engines (unpacked from their .debs into --synth-root, see tools/train/unpack_debs.sh):
  espeak-ng  English voices x variants, rate 120-220 wpm, pitch 20-80
  flite      kal, kal16, awb, rms, slt; duration stretch 0.85-1.2, mean F0 shifted
  festival   kal_diphone, ked_diphone, cmu_us_slt_arctic_hts; duration stretch 0.85-1.2

Each utterance is resampled to 16 kHz, its leading and trailing silence trimmed (so that the
timestamps of packed windows are tight), and stored as int16. A shard is `NAME.i16` (all
samples) plus `NAME.jsonl` (one line per utterance: offset, samples, text, voice). Everything
is seeded: the same arguments give the same audio (the synthesizers are deterministic).

  python3 tools/train/synth.py --synth-root R --sentences corpus/train.txt --count 40000 \
      --voices train --out data/train --jobs 16 --seed 1
"""
import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import wave
from multiprocessing import Pool

import numpy as np

ESPEAK_BASES = ["en-us", "en", "en-gb-scotland", "en-gb-x-rp", "en-gb-x-gbclan", "en-gb-x-gbcwmd", "en-029"]
ESPEAK_VARIANTS = ["", "m1", "m2", "m3", "m4", "m5", "m6", "m7", "f1", "f2", "f3", "f4", "f5", "klatt",
                   "klatt2", "klatt3", "croak", "andy", "annie", "Andrea", "Denis", "Storm", "kaukovalta",
                   "michel", "steph", "edward", "john", "Alvin", "iven", "aunty", "boris", "david",
                   "anika", "max", "linda"]
FLITE_VOICES = ["kal", "kal16", "awb", "rms", "slt"]
FESTIVAL_VOICES = ["cmu_us_slt_arctic_hts", "ked_diphone"]  # festvox-us-slt-hts, festvox-kdlpc16k

# The held-out voice is never spoken in training data: it measures generalization to a speaker
# the model has not heard.
HELDOUT_VOICES = ["flite:rms"]


def voice_list(root):
    variants_dir = os.path.join(root, "usr/lib/x86_64-linux-gnu/espeak-ng-data/voices/!v")
    have = set(os.listdir(variants_dir)) if os.path.isdir(variants_dir) else set()
    voices = []
    for base in ESPEAK_BASES:
        for v in ESPEAK_VARIANTS:
            if v and v not in have:
                continue
            voices.append("espeak:" + base + ("+" + v if v else ""))
    voices += ["flite:" + v for v in FLITE_VOICES]
    voices += ["festival:" + v for v in FESTIVAL_VOICES]
    return voices


def engine_weights(voices):
    # Per-utterance share of each engine: espeak has many voices but one sound; the others
    # sound more natural and get a larger share per voice.
    # festival: HTS 0.38 s an utterance (10x espeak, spoken a shard at a time), ked diphone ~4x faster.
    share = {"espeak": 0.47, "flite": 0.38, "festival": 0.15}
    by_engine = {}
    for v in voices:
        by_engine.setdefault(v.split(":")[0], []).append(v)
    weights = []
    for v in voices:
        e = v.split(":")[0]
        weights.append(share[e] / len(by_engine[e]))
    return weights


def env_for(root):
    # bookworm ships some libraries (libdbus, libsystemd, ...) under /lib, not /usr/lib.
    lib = os.path.join(root, "usr/lib/x86_64-linux-gnu")
    dirs = [lib, os.path.join(lib, "pulseaudio"), os.path.join(root, "lib/x86_64-linux-gnu")]
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = ":".join(dirs + [env.get("LD_LIBRARY_PATH", "")])
    return env


def read_wav(path):
    with wave.open(path, "rb") as w:
        sr, n, ch, width = w.getframerate(), w.getnframes(), w.getnchannels(), w.getsampwidth()
        raw = w.readframes(n)
    if width != 2:
        raise RuntimeError("%s: %d-byte samples" % (path, width))
    x = np.frombuffer(raw, dtype="<i2").astype(np.float32)
    if ch > 1:
        x = x.reshape(-1, ch).mean(axis=1)
    return x, sr


def to_16k(x, sr):
    """Band-limited resampling through the spectrum (numpy only). The synthesizers' output
    starts and ends in silence, so the transform's wrap-around at the edges is inaudible."""
    if sr == 16000:
        return x
    n_out = int(round(len(x) * 16000 / sr))
    spec = np.fft.rfft(x)
    keep = n_out // 2 + 1
    if keep <= len(spec):
        spec = spec[:keep]
    else:
        spec = np.concatenate([spec, np.zeros(keep - len(spec), spec.dtype)])
    return (np.fft.irfft(spec, n_out) * (n_out / len(x))).astype(np.float32)


def trim(x, margin=480):
    """Cuts leading/trailing silence: 10 ms frames under 2% of the loudest frame's RMS."""
    frame = 160
    n = len(x) // frame
    if n == 0:
        return x
    rms = np.sqrt((x[: n * frame].reshape(n, frame) ** 2).mean(axis=1) + 1e-9)
    loud = np.nonzero(rms > 0.02 * rms.max())[0]
    if len(loud) == 0:
        return x[:0]
    start = max(0, loud[0] * frame - margin)
    end = min(len(x), (loud[-1] + 1) * frame + margin)
    return x[start:end]


def splice(sentences, rng):
    """A sentence-shaped run of 2-3 spans (2-8 words each) from random corpus sentences. The
    decoder cannot complete it from memory (the runs so far learned the training sentences and
    then wrote them whatever the audio said); it has to listen. Every word is one a synthesizer
    reads, since each comes from a corpus sentence."""
    words = []
    for k in range(rng.randint(2, 3)):
        w = sentences[rng.randrange(len(sentences))].split()
        n = min(len(w), rng.randint(2, 8))
        start = rng.randrange(len(w) - n + 1)
        span = [t.strip(".!?;:,") if j == n - 1 else t for j, t in enumerate(w[start: start + n])]
        if k and span[0][:1].isupper() and not span[0][1:2].isupper() and span[0] != "I":
            span[0] = span[0][0].lower() + span[0][1:]
        words += [t for t in span if t]
    text = " ".join(words)
    return text[0].upper() + text[1:] + "."


def festival_utterance(text, stretch, out):
    """The Scheme expressions that speak `text` at a duration stretch into the WAV file `out`."""
    safe = text.replace("\\", " ").replace('"', " ")
    return ["(Parameter.set 'Duration_Stretch %g)" % stretch,
            '(utt.save.wave (utt.synth (Utterance Text "%s")) "%s" \'riff)' % (safe, out)]


def synth_one(root, env, voice, text, rng, tmp):
    engine, name = voice.split(":", 1)
    bin_dir = os.path.join(root, "usr/bin")
    out = os.path.join(tmp, "u.wav")
    if engine == "espeak":
        rate = rng.randint(120, 220)
        pitch = rng.randint(20, 80)
        cmd = [os.path.join(bin_dir, "espeak-ng"), "--path=" + os.path.join(root, "usr/lib/x86_64-linux-gnu"),
               "-v", name, "-s", str(rate), "-p", str(pitch), "-w", out, text]
        params = {"rate": rate, "pitch": pitch}
    elif engine == "flite":
        stretch = round(rng.uniform(0.85, 1.2), 3)
        f0 = rng.randint(-15, 15)
        base_f0 = {"slt": 160, "kal": 100, "kal16": 100, "awb": 100, "rms": 95}[name]
        cmd = [os.path.join(bin_dir, "flite"), "-voice", name, "--setf", "duration_stretch=%g" % stretch,
               "--setf", "int_f0_target_mean=%d" % (base_f0 + f0), "-t", text, "-o", out]
        params = {"stretch": stretch, "f0": base_f0 + f0}
    elif engine == "festival":
        stretch = round(rng.uniform(0.85, 1.2), 3)
        # One Scheme expression per argument: festival --batch ignores all but the first of a run.
        cmd = [os.path.join(bin_dir, "festival"), "--batch", "(voice_%s)" % name] + festival_utterance(
            text, stretch, out)
        params = {"stretch": stretch}
    else:
        raise ValueError(voice)
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    x, sr = read_wav(out)
    os.unlink(out)
    return trim(to_16k(x, sr)), params


def festival_batch(root, env, items, rng, tmp):
    """Speaks festival's utterances of a shard in one process: its start (loading the HTS voice)
    costs more than an utterance, so one process per utterance spent half of all synthesis time
    on 10 % of the utterances. `items`: (key, text, voice name). Returns {key: (samples, params)};
    an utterance missing from it (festival stopped early) is spoken alone by the caller."""
    lines, params, voice = [], {}, None
    for key, text, name in items:
        stretch = round(rng.uniform(0.85, 1.2), 3)
        if name != voice:
            lines.append("(voice_%s)" % name)
            voice = name
        lines += festival_utterance(text, stretch, os.path.join(tmp, "f%d.wav" % key))
        params[key] = {"stretch": stretch}
    script = os.path.join(tmp, "batch.scm")
    with open(script, "w") as f:
        f.write("\n".join(lines) + "\n")
    try:
        subprocess.run([os.path.join(root, "usr/bin/festival"), "--batch", script], env=env, check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60 + 5 * len(items))
    except subprocess.TimeoutExpired:
        pass
    out = {}
    for key in params:
        path = os.path.join(tmp, "f%d.wav" % key)
        if os.path.exists(path):
            x, sr = read_wav(path)
            os.unlink(path)
            out[key] = (trim(to_16k(x, sr)), params[key])
    return out


def work(job):
    root, shard_path, items, seed = job
    env = env_for(root)
    rng = random.Random(seed)
    audio, rows = [], []
    offset = 0
    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as tmp:
        festival = [(k, text, voice.split(":", 1)[1]) for k, (_, text, voice) in enumerate(items)
                    if voice.startswith("festival:")]
        spoken = festival_batch(root, env, festival, rng, tmp) if festival else {}
        for k, (idx, text, voice) in enumerate(items):
            try:
                x, params = spoken[k] if k in spoken else synth_one(root, env, voice, text, rng, tmp)
            except Exception as e:  # a synthesizer failing on one sentence must not stop the run
                print("synth: %s %r: %s" % (voice, text[:40], e), file=sys.stderr)
                continue
            if len(x) < 1600 or len(x) > 16000 * 25:
                continue
            peak = np.abs(x).max()
            x16 = np.clip(x * (0.7 * 32767 / max(peak, 1.0)), -32768, 32767).astype("<i2")
            audio.append(x16)
            rows.append({"offset": offset, "samples": len(x16), "text": text, "voice": voice,
                         "sentence": idx, **params})
            offset += len(x16)
    np.concatenate(audio if audio else [np.zeros(0, "<i2")]).tofile(shard_path + ".i16")
    # The index is written last and renamed into place: a reader that sees NAME.jsonl (training
    # loads shards while synthesis is still running) finds NAME.i16 complete.
    with open(shard_path + ".jsonl.tmp", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    os.replace(shard_path + ".jsonl.tmp", shard_path + ".jsonl")
    return len(rows), offset


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--synth-root", required=True)
    ap.add_argument("--sentences", required=True)
    ap.add_argument("--count", type=int, required=True, help="utterances to make")
    ap.add_argument("--voices", choices=["train", "heldout", "seen-eval"], default="train",
                    help="train: all voices but the held-out ones, sentences drawn at random; "
                         "heldout: the held-out voices; seen-eval: one seen voice per sentence, in order")
    ap.add_argument("--out", required=True)
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--shard-size", type=int, default=250)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--splice", type=float, default=0.0,
                    help="train: fraction of utterances whose text is spliced from spans of several sentences")
    args = ap.parse_args()

    with open(args.sentences) as f:
        sentences = [l.strip() for l in f if l.strip()]
    all_voices = voice_list(args.synth_root)
    rng = random.Random(args.seed)
    if args.voices == "heldout":
        voices, weights = HELDOUT_VOICES, None
    else:
        voices = [v for v in all_voices if v not in HELDOUT_VOICES]
        weights = engine_weights(voices)
    items = []
    for i in range(args.count):
        idx = rng.randrange(len(sentences)) if args.voices == "train" else i % len(sentences)
        voice = rng.choices(voices, weights=weights)[0] if weights else voices[i % len(voices)]
        text = sentences[idx]
        if args.voices == "train" and rng.random() < args.splice:
            idx, text = -1, splice(sentences, rng)
        items.append((idx, text, voice))
    os.makedirs(args.out, exist_ok=True)
    jobs = []
    for s in range(0, len(items), args.shard_size):
        jobs.append((os.path.abspath(args.synth_root), os.path.join(args.out, "shard_%05d" % (s // args.shard_size)),
                     items[s: s + args.shard_size], args.seed * 1000003 + s))
    t0 = time.time()
    done_utts, done_samples = 0, 0
    # Training stops synthesis with SIGTERM: leave through the Pool's context so its workers end
    # too (killed outright they kept 13 cores busy through the evaluation).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with Pool(args.jobs) as pool:
        for n, samples in pool.imap_unordered(work, jobs):
            done_utts += n
            done_samples += samples
            print("synth: %d/%d utterances, %.1f h of audio, %.0f s" % (
                done_utts, len(items), done_samples / 16000 / 3600, time.time() - t0), flush=True)
    meta = {"count": done_utts, "hours": done_samples / 16000 / 3600, "voices": voices,
            "seconds": time.time() - t0, "seed": args.seed, "mode": args.voices}
    with open(os.path.join(args.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(json.dumps({k: v for k, v in meta.items() if k != "voices"}))


if __name__ == "__main__":
    main()
