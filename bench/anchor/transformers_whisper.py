"""Whisper for bench/gpu_bench.sh (GB_WHISPER=1): the checkpoint parlance serves, and the transformers
anchor on the same GPU.

A random-init WhisperForConditionalGeneration of the given layout (large-v3-turbo's dimensions over
the v3-layout fixture's config: 128 mel bins, 51866 tokens), made on the GPU in bf16.

  --write DIR   saves it as an HF snapshot (config.json, the fixture's generation_config.json,
                model.safetensors in f16) for `parlance serve --model DIR`, and exits;
  otherwise     times `generate` on the clip (one 30 s window) repeated `batch` times through
                WhisperFeatureExtractor, English transcription without timestamps, exactly
                --new-tokens new tokens (min = max: a random model's end of text would otherwise
                cut batches short), after a warm-up batch. One JSON line per batch size: requests/s,
                audio seconds per second and seconds per batch.

Usage: python3 transformers_whisper.py --config CONFIG.json --generation-config GEN.json [--edit JSON]
       (--write DIR | --wav clip.wav [--batches 1,64] [--new-tokens 100] [--reps 2])
Needs torch with CUDA, transformers >= 5.17, numpy.
"""
import argparse
import copy
import json
import os
import shutil
import time

import torch

from anchor_common import random_model, read_wav  # (this folder: the script's own is on sys.path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--generation-config", required=True)
    ap.add_argument("--edit", default="{}")
    ap.add_argument("--write")
    ap.add_argument("--wav")
    ap.add_argument("--batches", default="1,64")
    ap.add_argument("--new-tokens", type=int, default=100)
    ap.add_argument("--reps", type=int, default=2)
    a = ap.parse_args()
    if not a.write and not a.wav:
        ap.error("--write DIR or --wav clip.wav")
    from transformers import GenerationConfig, WhisperConfig, WhisperFeatureExtractor, WhisperForConditionalGeneration

    with open(a.config) as f:
        raw = json.load(f)
    raw.update(json.loads(a.edit))
    cfg = WhisperConfig.from_dict(raw)
    model = random_model(WhisperForConditionalGeneration, cfg)
    if a.write:
        os.makedirs(a.write, exist_ok=True)
        model.to(torch.float16).save_pretrained(a.write)  # safetensors (transformers 5 writes nothing else)
        shutil.copy(a.generation_config, os.path.join(a.write, "generation_config.json"))
        print(json.dumps({"wrote": a.write, "parameters": sum(p.numel() for p in model.parameters())}), flush=True)
        return
    # The fixture's generation config (its language and task ids, forced_decoder_ids None), as
    # tools/reference/whisper_reference.py passes it.
    gc = GenerationConfig.from_pretrained(os.path.dirname(os.path.abspath(a.generation_config)),
                                          os.path.basename(a.generation_config))
    pcm = read_wav(a.wav)
    fe = WhisperFeatureExtractor(feature_size=cfg.num_mel_bins)
    one = fe(pcm, sampling_rate=16000, return_tensors="pt")["input_features"]  # [1, mels, 3000]
    print(json.dumps({"anchor": "transformers", "version": __import__("transformers").__version__,
                      "gpu": torch.cuda.get_device_name(0), "audio_seconds": round(len(pcm) / 16000, 2)}), flush=True)
    for b in [int(x) for x in a.batches.split(",")]:
        features = one.repeat(b, 1, 1).to("cuda", torch.bfloat16)
        times = []
        for rep in range(a.reps + 1):  # the first is the warm-up
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            with torch.no_grad():
                out = model.generate(features, generation_config=copy.deepcopy(gc), max_new_tokens=a.new_tokens,
                                     min_new_tokens=a.new_tokens, do_sample=False, language="en",
                                     task="transcribe", return_timestamps=False)
            torch.cuda.synchronize()
            if rep:
                times.append(time.perf_counter() - t0)
        best = min(times)
        seqs = out if torch.is_tensor(out) else out["sequences"]
        print(json.dumps({"anchor": "transformers", "batch": b, "sequence_length": int(seqs.shape[1]),
                          "seconds": round(best, 4), "req_per_s": round(b / best, 2),
                          "audio_s_per_s": round(b * len(pcm) / 16000 / best, 1)}), flush=True)


if __name__ == "__main__":
    main()
