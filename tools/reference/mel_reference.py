#!/usr/bin/env python3
"""Whisper log-mel reference features from transformers' WhisperFeatureExtractor (numpy path).

Run on a machine with numpy and transformers (no ffmpeg needed):

    python3 tools/reference/mel_reference.py --audio-dir tests/fixtures/audio --out tests/fixtures/mel

For every WAV in --audio-dir (16-bit PCM, mono, 16 kHz; read with the `wave` module, samples / 32768
as float32, exactly as parlance's read_wav does) and every feature_size in (80, 128) it writes:

  <stem>.mel<N>.f32 / .json          default call: padded with zeros to 30 s (480000 samples),
                                     3000 frames; only the first `shape[1]` frames (those covering the
                                     audio plus a few padding frames) are stored, plus `full_max` (the
                                     max over all 3000 frames) and `tail_frame` (frame 2999, pure
                                     padding: the clamp floor) so that the clamp can be checked.
  <stem>.mel<N>.longest.f32 / .json  long-form mode: padding="longest", truncation=False, a single
                                     input: no padding to 30 s, n_samples // 160 frames, all stored.

.f32 files are raw little-endian float32, row-major [feature_size, frames]. The JSON sidecar records
shape, source, n_samples, feature_size, mode, transformers_version, numpy_version and how far the
torch path (WhisperFeatureExtractor.__call__ when torch is installed) is from the numpy path.
"""

import argparse
import inspect
import json
import pathlib
import sys
import wave

import numpy as np
import transformers
from transformers import WhisperFeatureExtractor

SAMPLE_RATE = 16000
HOP = 160
EXTRA_FRAMES = 4  # padding frames stored after the last frame that touches the audio


def read_wav_s16_mono(path):
    with wave.open(str(path), "rb") as w:
        if w.getsampwidth() != 2 or w.getnchannels() != 1 or w.getframerate() != SAMPLE_RATE:
            raise SystemExit(f"{path}: need 16-bit mono {SAMPLE_RATE} Hz, got "
                             f"{8 * w.getsampwidth()}-bit, {w.getnchannels()} ch, {w.getframerate()} Hz")
        raw = w.readframes(w.getnframes())
    pcm = np.frombuffer(raw, dtype="<i2").astype(np.float32) / np.float32(32768.0)
    return pcm.astype(np.float32)


def numpy_features(fe, waveform):
    """The numpy log-mel path on one already padded/trimmed float32 waveform -> [n_mels, frames]."""
    fn = getattr(fe, "_np_extract_fbank_features", None)
    if fn is None:
        raise SystemExit("this transformers has no WhisperFeatureExtractor._np_extract_fbank_features; "
                         "the reference must come from the numpy path -- please report the version")
    params = list(inspect.signature(fn).parameters)
    if "device" in params:  # transformers >= 4.4x: (waveform_batch, device)
        out = fn(waveform[None, :], "cpu")
        return np.asarray(out[0], dtype=np.float32)
    return np.asarray(fn(waveform), dtype=np.float32)  # older: (waveform)


def pad_or_trim(pcm, length):
    out = np.zeros(length, dtype=np.float32)
    n = min(length, pcm.shape[0])
    out[:n] = pcm[:n]
    return out


def write(out_dir, name, array, meta):
    array = np.ascontiguousarray(array, dtype="<f4")
    (out_dir / f"{name}.f32").write_bytes(array.tobytes())
    meta = dict(meta, shape=list(array.shape), file=f"{name}.f32")
    (out_dir / f"{name}.json").write_text(json.dumps(meta, indent=1) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--audio-dir", default="tests/fixtures/audio")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    audio_dir = pathlib.Path(args.audio_dir)
    out_dir = pathlib.Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    wavs = sorted(audio_dir.glob("*.wav"))
    if not wavs:
        raise SystemExit(f"no .wav files in {audio_dir}")

    common = {"transformers_version": transformers.__version__, "numpy_version": np.__version__,
              "sampling_rate": SAMPLE_RATE}
    total = 0
    for n_mels in (80, 128):
        fe = WhisperFeatureExtractor(feature_size=n_mels)
        for wav in wavs:
            pcm = read_wav_s16_mono(wav)
            n = int(pcm.shape[0])
            base = dict(common, source=wav.name, n_samples=n, feature_size=n_mels)

            # 1. Default call: pad/truncate to 30 s. The numpy path is the reference; the public
            #    __call__ (torch path when torch is importable) is only compared and recorded.
            padded = pad_or_trim(pcm, fe.n_samples)
            full = numpy_features(fe, padded)
            assert full.shape == (n_mels, fe.nb_max_frames), full.shape
            via_call = fe(pcm, sampling_rate=SAMPLE_RATE, return_tensors="np").input_features[0]
            keep = min(full.shape[1], -(-min(n, fe.n_samples) // HOP) + EXTRA_FRAMES)
            write(out_dir, f"{wav.stem}.mel{n_mels}", full[:, :keep], dict(
                base, mode="max_length", pad_or_trim_to=int(fe.n_samples), total_frames=int(full.shape[1]),
                full_max=float(full.max()), full_min=float(full.min()),
                tail_frame=[float(v) for v in full[:, -1]],
                call_vs_numpy_max_abs_diff=float(np.abs(np.asarray(via_call, np.float32) - full).max())))
            total += keep * n_mels * 4

            # 2. Long-form: the whole recording as one array (padding="longest", truncation=False).
            longest = numpy_features(fe, pcm)
            via_call = fe(pcm, sampling_rate=SAMPLE_RATE, return_tensors="np", padding="longest",
                          truncation=False).input_features[0]
            write(out_dir, f"{wav.stem}.mel{n_mels}.longest", longest, dict(
                base, mode="longest", pad_or_trim_to=0, total_frames=int(longest.shape[1]),
                full_max=float(longest.max()), full_min=float(longest.min()),
                call_vs_numpy_max_abs_diff=float(np.abs(np.asarray(via_call, np.float32) - longest).max())))
            total += longest.size * 4
            print(f"{wav.name} n_mels={n_mels}: {keep} of {full.shape[1]} frames stored, "
                  f"longest {longest.shape[1]} frames", file=sys.stderr)
    print(f"wrote {total / 1e6:.2f} MB of features to {out_dir}", file=sys.stderr)


if __name__ == "__main__":
    main()
