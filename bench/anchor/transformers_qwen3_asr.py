"""The transformers anchor of bench/gpu_bench.sh: Qwen3-ASR's `generate` on one GPU, batch by batch.

A random-init Qwen3ASRForConditionalGeneration of the given layout (bf16, sdpa), the same clip
repeated `batch` times through its feature extractor, `generate` with exactly `--new-tokens` new
tokens (min = max: a random model's end-of-sequence would otherwise cut batches short), timed
after a warm-up batch. Prints one JSON line per batch size: requests/s and seconds per batch.

Usage: python3 transformers_qwen3_asr.py --config CONFIG.json [--edit JSON] --wav clip.wav
       [--batches 1,8,64] [--new-tokens 40] [--reps 2]
CONFIG.json: a Qwen3-ASR HF config (tests/fixtures/qwen3_asr/layout-0.6b/config.json); --edit merges
a JSON object into it (bench/gpu_bench.sh's 1.7B layout, the same edit parlance's model gets).
Needs torch with CUDA, transformers >= 5.17 (Qwen3ASR*), numpy.
"""
import argparse
import json
import time

import torch

from anchor_common import random_model, read_wav  # (this folder: the script's own is on sys.path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--edit", default="{}")
    ap.add_argument("--wav", required=True)
    ap.add_argument("--batches", default="1,8,64")
    ap.add_argument("--new-tokens", type=int, default=40)
    ap.add_argument("--reps", type=int, default=2)
    a = ap.parse_args()
    from transformers import Qwen3ASRConfig, Qwen3ASRFeatureExtractor, Qwen3ASRForConditionalGeneration

    with open(a.config) as f:
        raw = json.load(f)

    def merge(into, edit):
        for k, v in edit.items():
            if isinstance(v, dict) and isinstance(into.get(k), dict):
                merge(into[k], v)
            else:
                into[k] = v

    merge(raw, json.loads(a.edit))
    cfg = Qwen3ASRConfig.from_dict(raw)
    model = random_model(Qwen3ASRForConditionalGeneration, cfg)
    pcm = read_wav(a.wav)
    fe = Qwen3ASRFeatureExtractor()
    one = fe(pcm, sampling_rate=16000, padding=True, return_attention_mask=True, return_tensors="pt")
    n_audio = None
    with torch.no_grad():
        enc = model.model.audio_tower(input_features=one["input_features"].to("cuda", torch.bfloat16),
                                      input_features_mask=one["attention_mask"].to("cuda"))
        n_audio = int(enc.last_hidden_state.shape[0])
    audio_id = cfg.audio_token_id
    # The toolkit's prompt shape (ids are random-model ids: only the length and the audio
    # placeholders matter for the work): 9 ids before the audio, 7 after, as the real prompt.
    prompt = [1] * 9 + [audio_id] * n_audio + [1] * 7
    device = "cuda"
    print(json.dumps({"anchor": "transformers", "version": __import__("transformers").__version__,
                      "gpu": torch.cuda.get_device_name(0), "audio_tokens": n_audio, "prompt": len(prompt)}),
          flush=True)
    for b in [int(x) for x in a.batches.split(",")]:
        inputs = {
            "input_ids": torch.tensor([prompt] * b, device=device),
            "attention_mask": torch.ones(b, len(prompt), dtype=torch.long, device=device),
            "input_features": one["input_features"].repeat(b, 1, 1).to(device, torch.bfloat16),
            "input_features_mask": one["attention_mask"].repeat(b, 1).to(device),
        }
        times = []
        for rep in range(a.reps + 1):  # the first is the warm-up
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            with torch.no_grad():
                out = model.generate(**inputs, max_new_tokens=a.new_tokens, min_new_tokens=a.new_tokens,
                                     do_sample=False)
            torch.cuda.synchronize()
            if rep:
                times.append(time.perf_counter() - t0)
        assert out.shape[1] - len(prompt) == a.new_tokens, out.shape
        best = min(times)
        print(json.dumps({"anchor": "transformers", "batch": b, "seconds": round(best, 4),
                          "req_per_s": round(b / best, 2)}), flush=True)


if __name__ == "__main__":
    main()
