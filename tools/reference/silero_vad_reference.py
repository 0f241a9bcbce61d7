#!/usr/bin/env python3
"""Silero VAD v5 reference: per-window speech probabilities from onnxruntime on the real model
(silero_vad_v5.onnx, from the npm package @ricky0123/vad-web that scripts/setup.sh fetches), fed
exactly as the official OnnxWrapper (silero-vad's utils_vad.py) feeds it: windows of 512 samples
at 16 kHz (256 at 8 kHz), each prefixed by the last 64 (32) samples of the input before it (zeros
at the start), the LSTM state (2, 1, 128) carried from window to window, a last partial window
padded with zeros. The golden parlance's port is proven against (issue 16).

    python3 tools/reference/silero_vad_reference.py --model silero_vad_v5.onnx \
        --audio-dir tests/fixtures/audio --out tests/fixtures/silero_vad/reference.json

Needs onnxruntime and numpy. Clips: every 16 kHz mono 16-bit WAV in --audio-dir at 16 kHz, and
jfk.wav decimated to 8 kHz (every second sample: the test builds the same input).
"""

import argparse
import json
import os
import wave

import numpy as np
import onnxruntime as ort


def read_wav(path):
    with wave.open(path, "rb") as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1, path
        rate = w.getframerate()
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768.0
    return pcm, rate


def probabilities(session, pcm, rate):
    window = 512 if rate == 16000 else 256
    context_size = 64 if rate == 16000 else 32
    state = np.zeros((2, 1, 128), dtype=np.float32)
    context = np.zeros((1, context_size), dtype=np.float32)
    out = []
    for start in range(0, len(pcm), window):
        chunk = pcm[start:start + window]
        if len(chunk) < window:
            chunk = np.pad(chunk, (0, window - len(chunk)))
        x = np.concatenate([context, chunk[None, :]], axis=1)
        prob, state = session.run(None, {"input": x, "state": state, "sr": np.array(rate, dtype=np.int64)})
        context = x[:, -context_size:]
        out.append(float(prob[0][0]))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--audio-dir", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    session = ort.InferenceSession(a.model, opts, providers=["CPUExecutionProvider"])
    clips = {}
    for name in sorted(os.listdir(a.audio_dir)):
        if not name.endswith(".wav"):
            continue
        pcm, rate = read_wav(os.path.join(a.audio_dir, name))
        if rate != 16000:
            continue
        clips[name] = {"sample_rate": 16000, "samples": len(pcm), "probabilities": probabilities(session, pcm, 16000)}
        if name == "jfk.wav":
            pcm8 = pcm[::2].copy()
            clips["jfk.wav@8k"] = {"sample_rate": 8000, "samples": len(pcm8), "decimated_from": name,
                                   "probabilities": probabilities(session, pcm8, 8000)}
        print(name, len(clips[name]["probabilities"]), "windows", flush=True)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump({"model": os.path.basename(a.model), "onnxruntime": ort.__version__,
                   "wrapper": "silero-vad utils_vad.OnnxWrapper semantics (context + carried state)",
                   "clips": clips}, f, indent=1)


if __name__ == "__main__":
    main()
