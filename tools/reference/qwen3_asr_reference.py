#!/usr/bin/env python3
"""Qwen3-ASR reference generator: a random-init Qwen3ASRForConditionalGeneration (transformers
5.17's models/qwen3_asr) on real recordings, and what transformers computes: the features, the
audio encoder's output before and after the projector, the prompt's last-position logits and
greedy continuations. The fixture parlance's Qwen3-ASR is proven against (issue 15, BRIEF §4).

    PYTHONUNBUFFERED=1 python3 tools/reference/qwen3_asr_reference.py \
        --tokenizer-dir ~/.cache/parlance/assets/qwen3 --audio-dir tests/fixtures/audio --out OUTDIR

Needs torch, transformers 5.17 (Qwen3ASR*), numpy. float32 and float64 on CPU, fixed seeds.

Output, one folder per config:
    config.json      the checkpoint's config.json as transformers saves it
    reference.json   per clip: samples, feature shape, mask length, strided features, the
                     encoder output (ln_post) and the projected audio embeddings in float64, the
                     toolkit prompt's ids, last-position logits (every LOGIT_STRIDE-th id + top 10,
                     float64), greedy ids at a fixed length with their top-2 margins

Weights are not committed: qwen3_reference.synthetic_weight (the tests' counter-based
generator) fills every parameter; convolution kernels are drawn as [out, in*kh*kw] (fan-in
in*kh*kw) and reshaped, and LayerNorm weights (names ending in 'norm.weight' or
'ln_post.weight') are near 1. Prompt ids are built from the Qwen3 tokenizer plus the Qwen3-ASR
special ids below (the Qwen3 tokenizer has no audio tokens), in the toolkit's prompt format.
"""

import argparse
import copy
import json
import os
import sys
import time
import wave

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qwen3_reference import synthetic_weight  # noqa: E402

IM_START, IM_END, ENDOFTEXT = 151644, 151645, 151643
AUDIO_START, AUDIO_END, AUDIO_PAD = 151669, 151670, 151676
ASR_TEXT = 151704
VOCAB_SIZE = 151936
EOS_IDS = [151643, 151645]
LOGIT_STRIDE = 64
FEATURE_STRIDE = 97
ARRAY_STRIDE = 4   # every 4th element of the encoder and embedding outputs (the fixture's size)

CONFIGS = {
    # Small dims; the real layout's structure: conv stack 3 x (k3, s2), windows of 104 tokens,
    # 13 positions per chunk, projector to the text width, a tied Qwen3 decoder with GQA 4:2.
    "tiny": dict(
        audio=dict(num_mel_bins=128, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=64,
                   d_model=32, downsample_hidden_size=8, output_dim=16, n_window=50, n_window_infer=800,
                   max_position_embeddings=13, activation_function="gelu"),
        text=dict(hidden_size=16, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=16, tie_word_embeddings=True, rope_theta=1000000.0),
        greedy_tokens=12),
    # Qwen3-ASR-0.6B's layer and head layout (audio 18 layers x 14 heads, text 28 layers x 16/8
    # heads of 128, tied) at reduced width.
    "layout-0.6b": dict(
        audio=dict(num_mel_bins=128, encoder_layers=18, encoder_attention_heads=14, encoder_ffn_dim=112,
                   d_model=56, downsample_hidden_size=8, output_dim=16, n_window=50, n_window_infer=800,
                   max_position_embeddings=13, activation_function="gelu"),
        text=dict(hidden_size=16, intermediate_size=48, num_hidden_layers=28, num_attention_heads=16,
                  num_key_value_heads=8, head_dim=128, tie_word_embeddings=True, rope_theta=1000000.0),
        greedy_tokens=8),
}
CONTEXT = "President Kennedy, inaugural address, 1961"

# (name, file, first sample, samples, repeats): two attention windows (8-16 s), a partial last
# chunk, under the 0.5 s minimum (zero-padded to 8000 samples), exactly 1 s, over 30 s (the clip
# three times: five windows in one prompt).
CLIPS = [
    ("jfk_11s", "jfk.wav", 0, None, 1),
    ("partial_chunk", "sense_and_sensibility_01_austen_64kb-0880.wav", 0, 37920, 1),
    ("short_0.3s", "jfk.wav", 16000, 4800, 1),
    ("one_second", "jfk.wav", 32000, 16000, 1),
    ("over_30s", "jfk.wav", 0, None, 3),
]


def round_floats(o):
    if isinstance(o, float):
        return float(f"{o:.8g}")
    if isinstance(o, list):
        return [round_floats(x) for x in o]
    if isinstance(o, dict):
        return {k: round_floats(v) for k, v in o.items()}
    return o


def read_wav(path):
    with wave.open(path, "rb") as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2, path
        data = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16)
    return data.astype(np.float32) / 32768.0


def weight_for(name, shape, seed):
    if len(shape) == 4:  # conv kernels: fan-in = in * kh * kw
        flat = synthetic_weight(name, (shape[0], shape[1] * shape[2] * shape[3]), seed)
        return flat.reshape(shape)
    if name.endswith("ln_post.weight"):
        return synthetic_weight(name[: -len("ln_post.weight")] + "ln_post.norm.weight", shape, seed)
    return synthetic_weight(name, shape, seed)


def build(spec, seed):
    from transformers import Qwen3ASRConfig, Qwen3ASRForConditionalGeneration
    text = dict(spec["text"], vocab_size=VOCAB_SIZE, hidden_act="silu", max_position_embeddings=4096,
                rms_norm_eps=1e-6, attention_bias=False, bos_token_id=ENDOFTEXT, eos_token_id=IM_END)
    cfg = Qwen3ASRConfig(audio_config=dict(spec["audio"]), text_config=text, tie_word_embeddings=True)
    rp = getattr(cfg.text_config, "rope_parameters", None)
    if isinstance(rp, dict):
        rp["rope_theta"] = spec["text"]["rope_theta"]
    torch.manual_seed(seed)
    model = Qwen3ASRForConditionalGeneration(cfg).eval()
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(weight_for(n, tuple(p.shape), seed))
            assert torch.equal(p, p.to(torch.bfloat16).to(torch.float32)), n
    return model, cfg


def prompt_ids(tok, n_audio, language=None, context=""):
    """The toolkit's prompt: a system turn (always, with the context text), the user turn holding
    the audio placeholders, the assistant turn opened (forced language appended when given)."""
    enc = lambda s: tok.encode(s, add_special_tokens=False)  # noqa: E731
    ids = [IM_START] + enc("system\n" + context) + [IM_END] + enc("\n")
    ids += [IM_START] + enc("user\n") + [AUDIO_START] + [AUDIO_PAD] * n_audio + [AUDIO_END] + [IM_END] + enc("\n")
    ids += [IM_START] + enc("assistant\n")
    if language:
        ids += enc("language " + language) + [ASR_TEXT]
    return ids


def greedy(model, inputs, n, stops=None):
    """Argmax decoding, one forward per token on the model's cache (the audio enters with the
    first forward only): n tokens with end-of-sequence suppressed (generate's min_new_tokens = n),
    or, with `stops`, up to n tokens ending at the first stop id (kept, as generate returns it)."""
    ids, margins = [], []
    length = inputs["input_ids"].shape[1]
    with torch.no_grad():
        out = model(**inputs, use_cache=True)
        for step in range(n):
            logits = out.logits[0, -1].float().clone()
            if stops is None:
                logits[EOS_IDS] = -float("inf")
            top = torch.topk(logits, 2)
            margins.append(float(top.values[0] - top.values[1]))
            ids.append(int(top.indices[0]))
            if step == n - 1 or (stops is not None and ids[-1] in stops):
                break
            out = model(input_ids=torch.tensor([[ids[-1]]]), past_key_values=out.past_key_values, use_cache=True,
                        attention_mask=torch.ones(1, length + len(ids), dtype=torch.long))
    return ids, margins


def run_config(name, spec, tok, audio_dir, out_dir, seed):
    from transformers import Qwen3ASRFeatureExtractor
    t0 = time.time()
    model, cfg = build(spec, seed)
    odir = os.path.join(out_dir, name)
    os.makedirs(odir, exist_ok=True)
    cfg.to_json_file(os.path.join(odir, "config.json"))
    model64 = copy.deepcopy(model).to(torch.float64)
    fe = Qwen3ASRFeatureExtractor()
    cases = []
    stop_token = None
    for cname, fname, start, count, repeats in CLIPS:
        pcm = read_wav(os.path.join(audio_dir, fname))
        pcm = pcm[start:] if count is None else pcm[start:start + count]
        pcm = np.tile(pcm, repeats)
        f = fe(pcm, sampling_rate=16000, padding=True, return_attention_mask=True, return_tensors="pt")
        feats, mask = f["input_features"], f["attention_mask"]
        n_valid = int(mask.sum())
        with torch.no_grad():
            enc32 = model.model.audio_tower(input_features=feats, input_features_mask=mask).last_hidden_state
            enc64 = model64.model.audio_tower(input_features=feats.double(), input_features_mask=mask).last_hidden_state
            emb64 = model64.model.multi_modal_projector(enc64)
        n_audio = int(enc64.shape[0])
        ids = prompt_ids(tok, n_audio)
        forced = prompt_ids(tok, n_audio, language="English")
        inputs = {"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids), dtype=torch.long),
                  "input_features": feats, "input_features_mask": mask}
        with torch.no_grad():
            logits = model(**inputs).logits[0, -1].float().numpy()
            in64 = dict(inputs, input_features=feats.double())
            logits64 = model64(**in64).logits[0, -1].numpy()
        top = [int(i) for i in np.argsort(-logits, kind="stable")[:10]]
        n = spec["greedy_tokens"]
        auto_ids, auto_m = greedy(model, inputs, n)
        finputs = dict(inputs, input_ids=torch.tensor([forced]), attention_mask=torch.ones(1, len(forced), dtype=torch.long))
        forced_ids, forced_m = greedy(model, finputs, n)
        context = prompt_ids(tok, n_audio, context=CONTEXT)
        cinputs = dict(inputs, input_ids=torch.tensor([context]), attention_mask=torch.ones(1, len(context), dtype=torch.long))
        context_ids, context_m = greedy(model, cinputs, n)
        # The 'real stop': a random model seldom ends by itself, so the stop case also stops on
        # the token the first clip's automatic run produces at its step 4 (an ordinary id, passed
        # as one more end-of-sequence id).
        if stop_token is None:
            stop_token = auto_ids[4]
        stop_ids, stop_m = greedy(model, inputs, 40, stops=EOS_IDS + [stop_token])
        fe_flat = feats[0].numpy().reshape(-1)
        cases.append({
            "name": cname, "file": fname, "first_sample": start, "repeats": repeats, "samples": int(len(pcm)),
            "features_shape": list(feats.shape[1:]), "valid_frames": n_valid,
            "features_strided": [float(v) for v in fe_flat[::FEATURE_STRIDE]],
            "features_sum": float(feats.double().sum()),
            "audio_tokens": n_audio,
            "encoder_f64": [float(v) for v in enc64.reshape(-1)[::ARRAY_STRIDE]],
            "encoder_f32_max_abs_diff_from_f64": float((enc32.double() - enc64).abs().max()),
            "audio_embeddings_f64": [float(v) for v in emb64.reshape(-1)[::ARRAY_STRIDE]],
            "prompt_ids": ids,
            "logits_strided_f64": [float(v) for v in logits64[::LOGIT_STRIDE]],
            "top10_ids": top, "top10_logits_f64": [float(logits64[i]) for i in top],
            "greedy_auto": {"max_new_tokens": n, "ids": auto_ids, "margins": auto_m},
            "greedy_forced_english": {"prompt_ids": forced, "max_new_tokens": n, "ids": forced_ids,
                                      "margins": forced_m},
            "greedy_context": {"context": CONTEXT, "prompt_ids": context, "max_new_tokens": n, "ids": context_ids,
                               "margins": context_m},
            "greedy_stop": {"max_new_tokens": 40, "eos_token_ids": EOS_IDS + [stop_token], "ids": stop_ids,
                            "margins": stop_m, "stopped": bool(stop_ids and stop_ids[-1] in EOS_IDS + [stop_token])},
        })
        print(f"[{name}] {cname}: {len(pcm)} samples, features {list(feats.shape[1:])} ({n_valid} valid), "
              f"{n_audio} audio tokens, prompt {len(ids)}, auto {auto_ids[:6]}...", flush=True)
    import transformers
    ref = {
        "generator": "tools/reference/qwen3_asr_reference.py",
        "transformers": transformers.__version__, "torch": torch.__version__, "seed": seed,
        "config_name": name, "logit_stride": LOGIT_STRIDE, "feature_stride": FEATURE_STRIDE,
        "stop_token": stop_token, "array_stride": ARRAY_STRIDE,
        "special_ids": {"im_start": IM_START, "im_end": IM_END, "endoftext": ENDOFTEXT,
                        "audio_start": AUDIO_START, "audio_end": AUDIO_END, "audio_pad": AUDIO_PAD,
                        "asr_text": ASR_TEXT},
        "weights": "qwen3_reference.synthetic_weight; conv kernels as [out, in*kh*kw]; ln_post near 1",
        "cases": cases,
    }
    # Eight significant digits are ample for the 1e-3 tolerances and keep the fixture small.
    ref["float_digits"] = 8
    with open(os.path.join(odir, "reference.json"), "w") as fh:
        json.dump(round_floats(ref), fh, separators=(",", ":"))
    print(f"[{name}] done in {time.time() - t0:.1f} s", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer-dir", required=True)
    ap.add_argument("--audio-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=4321)
    args = ap.parse_args()
    torch.use_deterministic_algorithms(True)
    from transformers import PreTrainedTokenizerFast
    tok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(args.tokenizer_dir, "tokenizer.json"))
    for i, (name, spec) in enumerate(CONFIGS.items()):
        run_config(name, spec, tok, args.audio_dir, args.out, args.seed + i)


if __name__ == "__main__":
    main()
