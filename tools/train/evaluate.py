#!/usr/bin/env python3
"""Transcribes evaluation clips with transformers and scores them (word error rate).

Sets:
  shard folders from synth.py (held-out sentences by seen voices, by the held-out voice),
  no-speech clips made here (digital silence, white/pink/brown noise at several levels),
  real recordings (WAV files with a `NAME.txt` reference beside each).

The model's default decoding (generation_config.json's num_beams: greedy when absent, beam
search when the model asks for it; --num-beams overrides), no timestamps, language en, task
transcribe; the report records the beams. Writes JSON with every reference, hypothesis and the
SHA-256 of each clip's samples, so that parlance's run on the same clips can be compared
transcript by transcript (tools/train/compare.py), and optionally the clips themselves (--save-clips, .npz).

  python3 evaluate.py --model model --set seen=data/eval_seen --set heldout=data/eval_heldout \
      --real tests/fixtures/train_real --out eval.json
"""
import argparse
import glob
import hashlib
import json
import os
import re
import time
import wave

import numpy as np
import torch

SR = 16000


def normalize(text):
    text = text.lower().replace("-", " ")
    text = re.sub(r"[^a-z' ]", " ", text)
    text = re.sub(r"\s+", " ", text).strip()
    return text.split()


def edit_distance(ref, hyp):
    d = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, d[0] = d[0], i
        for j, h in enumerate(hyp, 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (r != h))
    return d[len(hyp)]


def wer(pairs):
    errors = sum(edit_distance(normalize(r), normalize(h)) for r, h in pairs)
    words = sum(len(normalize(r)) for r, _ in pairs)
    return errors / max(1, words), errors, words


def read_wav(path):
    with wave.open(path, "rb") as w:
        if w.getframerate() != SR or w.getsampwidth() != 2:
            raise SystemExit("%s: need 16 kHz 16-bit PCM" % path)
        x = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
        if w.getnchannels() > 1:
            x = x.reshape(-1, w.getnchannels())[:, 0]
    return x.copy()


def shard_clips(folder, limit):
    clips = []
    for p in sorted(glob.glob(os.path.join(folder, "shard_*.jsonl"))):
        samples = np.fromfile(p[: -len(".jsonl")] + ".i16", dtype="<i2")
        for r in (json.loads(l) for l in open(p)):
            x = samples[r["offset"]: r["offset"] + r["samples"]]
            # Half a second of silence either side, as a recording would have.
            x = np.concatenate([np.zeros(SR // 2, "<i2"), x, np.zeros(SR // 2, "<i2")])
            clips.append({"id": "%s-%05d" % (os.path.basename(folder), len(clips)), "ref": r["text"],
                          "voice": r["voice"], "audio": x})
            if len(clips) >= limit:
                return clips
    return clips


def nospeech_clips(seed=5):
    rng = np.random.default_rng(seed)
    clips = [{"id": "silence", "ref": "", "audio": np.zeros(5 * SR, "<i2")}]
    n = 10 * SR
    for alpha, name in ((0, "white"), (1, "pink"), (2, "brown")):
        spec = np.fft.rfft(rng.standard_normal(n))
        f = np.maximum(np.arange(len(spec)), 1.0)
        x = np.fft.irfft(spec * f ** (-alpha / 2), n)
        x /= np.sqrt((x ** 2).mean())
        for dbfs in (-40, -20):
            y = np.clip(x * 10 ** (dbfs / 20), -1, 1)
            clips.append({"id": "%s-noise%d" % (name, dbfs), "ref": "", "audio": (y * 32767).astype("<i2")})
    return clips


def real_clips(folder):
    clips = []
    for p in sorted(glob.glob(os.path.join(folder, "*.wav"))):
        ref_path = p[:-4] + ".txt"
        ref = open(ref_path).read().strip() if os.path.exists(ref_path) else ""
        clips.append({"id": os.path.basename(p)[:-4], "ref": ref, "audio": read_wav(p)})
    return clips


class Transcriber:
    def __init__(self, model_dir, device, num_beams=None):
        from tokenizers import Tokenizer
        from transformers import GenerationConfig, WhisperFeatureExtractor, WhisperForConditionalGeneration
        self.device = device
        self.model = WhisperForConditionalGeneration.from_pretrained(model_dir, dtype=torch.float32).to(device).eval()
        self.gc = GenerationConfig.from_pretrained(model_dir)
        if num_beams:
            self.gc.num_beams = num_beams
        self.num_beams = self.gc.num_beams or 1
        self.last_beams = self.num_beams  # what the last run() decoded with
        self.fe = WhisperFeatureExtractor.from_pretrained(model_dir)
        self.tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
        self.eot = self.gc.eos_token_id
        self.ts0 = self.gc.no_timestamps_token_id + 1
        self.nospeech = self.tok.token_to_id("<|nospeech|>")
        self.sot = self.gc.decoder_start_token_id
        self.method = None

    def features(self, audios):
        f = self.fe([a.astype(np.float32) / 32768.0 for a in audios], sampling_rate=SR, return_tensors="pt")
        return f.input_features.to(self.device)

    def text(self, ids):
        ids = [i for i in ids if i < self.eot]
        return self.tok.decode(ids, skip_special_tokens=True).strip()

    @torch.no_grad()
    def run(self, feats, max_new_tokens=160):
        try:
            out = self.model.generate(input_features=feats, generation_config=self.gc, language="en",
                                      task="transcribe", return_timestamps=False, max_new_tokens=max_new_tokens)
            seqs = out.sequences if hasattr(out, "sequences") else out
            self.method, self.last_beams = "generate", self.num_beams
        except Exception as e:  # keep the evaluation alive on an API change; say which path ran
            print("generate failed (%s); greedy loop instead" % e, flush=True)
            seqs = self.greedy(feats, max_new_tokens)
            self.method, self.last_beams = "greedy-loop", 1
        texts = []
        for s in seqs.tolist():
            # Drop the forced prompt: everything up to <|notimestamps|>.
            if self.gc.no_timestamps_token_id in s:
                s = s[s.index(self.gc.no_timestamps_token_id) + 1:]
            texts.append(self.text(s))
        return texts

    @torch.no_grad()
    def greedy(self, feats, max_new_tokens):
        lang = self.gc.lang_to_id["<|en|>"]
        task = self.gc.task_to_id["transcribe"]
        B = feats.shape[0]
        enc = self.model.model.encoder(feats).last_hidden_state
        seq = torch.tensor([[self.sot, lang, task, self.gc.no_timestamps_token_id]] * B, device=self.device)
        done = torch.zeros(B, dtype=torch.bool, device=self.device)
        for step in range(max_new_tokens):
            logits = self.model(encoder_outputs=(enc,), decoder_input_ids=seq).logits[:, -1].float()
            logits[:, self.ts0:] = -float("inf")
            if step == 0:
                logits[:, self.gc.begin_suppress_tokens] = -float("inf")
            nxt = logits.argmax(-1)
            nxt = torch.where(done, torch.full_like(nxt, self.eot), nxt)
            seq = torch.cat([seq, nxt[:, None]], 1)
            done |= nxt == self.eot
            if done.all():
                break
        return seq

    @torch.no_grad()
    def nospeech_prob(self, feats):
        sot = torch.full((feats.shape[0], 1), self.sot, device=self.device)
        logits = self.model(input_features=feats, decoder_input_ids=sot).logits[:, 0]
        return torch.softmax(logits.float(), -1)[:, self.nospeech].tolist()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--set", action="append", default=[], help="NAME=synth.py shard folder")
    ap.add_argument("--limit", type=int, default=400, help="clips per synthetic set")
    ap.add_argument("--real", help="folder of WAV files with NAME.txt references")
    ap.add_argument("--out", required=True)
    ap.add_argument("--save-clips", help="folder: one NAME.npz per set with the clips' samples")
    ap.add_argument("--save-limit", type=int, default=120, help="clips per saved set (the device returns <= 16 MiB a file)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--num-beams", type=int, help="beams (default: the model's generation_config.json, else 1)")
    args = ap.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    # Full float32 on the GPU (cuDNN's convolutions default to TF32, ~1e-3 relative): the
    # transcripts are compared with parlance's token for token, and near-tied tokens flip.
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    tr = Transcriber(args.model, device, args.num_beams)
    sets = {}
    for spec in args.set:
        name, folder = spec.split("=", 1)
        sets[name] = shard_clips(folder, args.limit)
    sets["nospeech"] = nospeech_clips()
    if args.real:
        sets["real"] = real_clips(args.real)
    # num_beams: as configured; each set records what it was decoded with.
    report = {"model": os.path.abspath(args.model), "num_beams": tr.num_beams, "sets": {}}
    t0 = time.time()
    for name, clips in sets.items():
        print("%-10s %4d clips: transcribing (%.0f s so far)" % (name, len(clips), time.time() - t0), flush=True)
        rows, beams = [], set()
        for i in range(0, len(clips), args.batch):
            part = clips[i: i + args.batch]
            feats = tr.features([c["audio"] for c in part])
            hyps = tr.run(feats)
            beams.add(tr.last_beams)
            probs = tr.nospeech_prob(feats)
            for c, h, p in zip(part, hyps, probs):
                rows.append({"id": c["id"], "ref": c["ref"], "hyp": h, "voice": c.get("voice"),
                             "nospeech_prob": round(p, 4), "seconds": round(len(c["audio"]) / SR, 3),
                             "sha256": hashlib.sha256(c["audio"].astype("<i2").tobytes()).hexdigest()})
        # The beams this set was decoded with (a list if the greedy fallback ran for some batches:
        # compare.py then refuses the set).
        entry = {"clips": len(rows), "num_beams": beams.pop() if len(beams) == 1 else sorted(beams), "rows": rows}
        if name == "nospeech":
            entry["clips_with_text"] = sum(1 for r in rows if normalize(r["hyp"]))
        else:
            w, e, n = wer([(r["ref"], r["hyp"]) for r in rows])
            entry.update({"wer": round(w, 4), "errors": e, "words": n})
        report["sets"][name] = entry
        print("%-10s %4d clips  %s" % (name, len(rows), {k: v for k, v in entry.items() if k != "rows"}), flush=True)
        # Written after every set: a run stopped by its timeout still returns what it measured.
        report["decoder"], report["seconds"] = tr.method, round(time.time() - t0, 1)
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
        if args.save_clips and name != "nospeech":
            os.makedirs(args.save_clips, exist_ok=True)
            np.savez_compressed(os.path.join(args.save_clips, name + ".npz"),
                                **{c["id"]: c["audio"] for c in clips[: args.save_limit]})
    report["decoder"] = tr.method
    report["seconds"] = round(time.time() - t0, 1)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
