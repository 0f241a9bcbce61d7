#!/usr/bin/env python3
"""Qwen3 reference generator: random-init Qwen3 causal LMs (transformers' Qwen3ForCausalLM) with
the real Qwen3 tokenizer, and transformers' outputs on them: the fixtures parlance's Qwen3 is
proven against (BRIEF §4).

    PYTHONUNBUFFERED=1 python3 tools/reference/qwen3_reference.py \
        --tokenizer-dir ~/.cache/parlance/assets/qwen3 --out OUTDIR [--convert DIR] [--tar TARDIR]

--convert DIR: the llama.cpp converter (DIR/convert_hf_to_gguf.py with its conversion/ and gguf-py/
folders from the pinned bundle) also writes each model as llama.cpp's GGUF (model.gguf, bf16), so
the GGUF loader is checked on a file llama.cpp made, not one parlance wrote.

Needs torch, transformers 5.x, safetensors, numpy. float32 on CPU, no TF32, fixed seeds.

Output, one folder per config:
    config.json            the checkpoint's config (the tests write the weights themselves)
    reference.json         prompts, their ids, greedy continuations with per-step top-2 margins,
                           each prompt's last-position logits at every LOGIT_STRIDE-th vocab id
                           plus its top 10; with --convert, the GGUF's layout (keys, tensors)
    model/                 (not committed) the HF checkpoint as transformers saved it, and
                           model.gguf as llama.cpp's converter wrote it

The weights are not committed (151,936 vocabulary rows make even a 16-wide model 10 MB): they
come from a counter-based generator (synthetic_weight below) that tests/unit/models/qwen3_fixture
reproduces bit for bit, so CI writes the same checkpoint in any dtype or layout (single or
sharded safetensors, GGUF with llama.cpp's names) and compares with what transformers computed.
Every value is a small integer times a power of two, exact in bfloat16, float16 and float32, so
each stored dtype holds the values transformers computed with in float32.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time

import numpy as np
import torch

# Prompts of several lengths: one token, a sentence, > 1 KV block (16 tokens), > 2 prefill chunks
# at the tests' 32-token budget, non-ASCII text.
PROMPTS = [
    ("one_token", "Hello"),
    ("sentence", "The quick brown fox jumps over the lazy dog."),
    ("two_blocks", "In the beginning the universe was created. This has made a lot of people very "
                   "angry and been widely regarded as a bad move."),
    ("long", "It is a truth universally acknowledged, that a single man in possession of a good "
             "fortune, must be in want of a wife. However little known the feelings or views of such "
             "a man may be on his first entering a neighbourhood, this truth is so well fixed in the "
             "minds of the surrounding families, that he is considered the rightful property of some "
             "one or other of their daughters."),
    ("non_ascii", "Grüße aus Köln! 東京は今日も晴れです。 Ça va? 🙂"),
]

CONFIGS = {
    # Small dims, tied embeddings (as Qwen3-0.6B), GQA 4:2.
    # Small dims, untied output projection, GQA 4:2. (The 151,936-row embedding dominates the
    # file: width 16 keeps each fixture under 10 MB.)
    "tiny": dict(hidden_size=16, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16, tie_word_embeddings=False,
                 rope_theta=1000000.0, greedy_tokens=24),
    # Qwen3-0.6B's layer and head layout (28 layers, 16 query / 8 key-value heads of 128, tied
    # embeddings as the real one) at reduced width, with another rope_theta.
    "layout-0.6b": dict(hidden_size=16, intermediate_size=48, num_hidden_layers=28,
                        num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                        tie_word_embeddings=True, rope_theta=10000.0, greedy_tokens=16),
}

VOCAB_SIZE = 151936          # Qwen3's embedding rows (the tokenizer has 151,669 ids)
EOS_IDS = [151645, 151643]   # <|im_end|>, <|endoftext|> (Qwen3's generation_config.json)


LOGIT_STRIDE = 64
MASK64 = (1 << 64) - 1


def splitmix64(x):
    """numpy uint64 array -> uint64 array (wrapping arithmetic)."""
    x = (x + np.uint64(0x9E3779B97F4A7C15)) & np.uint64(MASK64)
    z = x
    z = ((z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & np.uint64(MASK64)
    z = ((z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & np.uint64(MASK64)
    return z ^ (z >> np.uint64(31))


def fnv1a64(text):
    h = 0xCBF29CE484222325
    for b in text.encode():
        h = ((h ^ b) * 0x100000001B3) & MASK64
    return h


def synthetic_weight(name, shape, seed):
    """The tests' generator. Element i (row-major over PyTorch's shape) of tensor NAME:
    x = splitmix64(fnv1a64(NAME) ^ seed + i); k = (x >> 33) % 255 - 127 in [-127, 127].
    Norm weights (name ends in 'norm.weight'): 1 + (k % 33) / 128, in [0.75, 1.25].
    Others: k * 2^-e with e = 6 + floor(log2(fan_in) / 2) (fan_in = the last dimension), about
    1.2 / sqrt(fan_in) in standard deviation. Both forms are exact in bfloat16."""
    n = int(np.prod(shape))
    base = np.uint64((fnv1a64(name) ^ seed) & MASK64)
    idx = np.arange(n, dtype=np.uint64)
    x = splitmix64((base + idx) & np.uint64(MASK64))
    k = ((x >> np.uint64(33)) % np.uint64(255)).astype(np.int64) - 127
    if name.endswith("norm.weight"):
        kk = np.fmod(k, 33)  # C++'s % (truncating)
        v = 1.0 + kk.astype(np.float64) / 128.0
    else:
        fan_in = int(shape[-1])
        e = 6 + (fan_in.bit_length() - 1) // 2
        v = k.astype(np.float64) * 2.0 ** (-e)
    return torch.tensor(v.reshape(shape), dtype=torch.float32)


def build(name, spec, tok_dir, seed):
    from transformers import Qwen3Config, Qwen3ForCausalLM
    cfg = Qwen3Config(
        vocab_size=VOCAB_SIZE, hidden_size=spec["hidden_size"],
        intermediate_size=spec["intermediate_size"], num_hidden_layers=spec["num_hidden_layers"],
        num_attention_heads=spec["num_attention_heads"],
        num_key_value_heads=spec["num_key_value_heads"], head_dim=spec["head_dim"],
        hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-6,
        tie_word_embeddings=spec["tie_word_embeddings"], attention_bias=False,
        rope_theta=spec["rope_theta"], bos_token_id=151643, eos_token_id=151645,
        torch_dtype="bfloat16")
    # Older and newer transformers spell rope_theta differently; make sure the value is the one
    # asked for whichever way this version stores it.
    rp = getattr(cfg, "rope_parameters", None)
    if isinstance(rp, dict):
        rp["rope_theta"] = spec["rope_theta"]
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(cfg).eval()
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(synthetic_weight(n, tuple(p.shape), seed))
            assert torch.equal(p, p.to(torch.bfloat16).to(torch.float32)), n
    return model, cfg


def greedy(model, ids, n, min_new, eos):
    from transformers import GenerationConfig
    inp = torch.tensor([ids])
    gc = GenerationConfig(do_sample=False, max_new_tokens=n, min_new_tokens=min_new,
                          eos_token_id=eos, pad_token_id=151643, output_scores=True,
                          return_dict_in_generate=True)
    with torch.no_grad():
        out = model.generate(inp, attention_mask=torch.ones_like(inp), generation_config=gc)
    seq = out.sequences[0, len(ids):].tolist()
    margins = []
    for s in out.scores:
        top = torch.topk(s[0].float(), 2).values
        margins.append(float(top[0] - top[1]))
    return seq, margins


def run_config(name, spec, tok, tok_dir, out_dir, convert_dir, seed):
    t0 = time.time()
    model, cfg = build(name, spec, tok_dir, seed)
    mdir = os.path.join(out_dir, name, "model")
    os.makedirs(mdir, exist_ok=True)
    # Saved from a copy: casting the model itself to bfloat16 and back would also round its
    # rotary inv_freq buffer (not a weight), which shifted every rotated position.
    import copy
    copy.deepcopy(model).to(torch.bfloat16).save_pretrained(mdir, safe_serialization=True)
    shutil.copy(os.path.join(mdir, "config.json"), os.path.join(out_dir, name, "config.json"))
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tok_dir, f), os.path.join(mdir, f))
    with open(os.path.join(mdir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 151643, "eos_token_id": EOS_IDS, "pad_token_id": 151643,
                   "do_sample": False}, f, indent=2)
    # The 'real stop' case: a random model seldom emits <|im_end|>, so the stop case stops on
    # the token greedy decoding of the long prompt produces at its step 4 (an ordinary id,
    # passed as eos_token_id exactly as generation_config's list is).
    stop_ids, _ = greedy(model, tok.encode(PROMPTS[3][1]), 6, 6, None)
    stop_token = stop_ids[4]

    model64 = copy.deepcopy(model).to(torch.float64)
    cases = []
    stops = EOS_IDS + [stop_token]
    for pname, text in PROMPTS:
        ids = tok.encode(text)
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0, -1].float().numpy()
            # The same weights in float64: the exact logits. Random weights make this model
            # ill-conditioned enough that float32 transformers is itself ~1e-3 off on long
            # prompts (checked by a float64 re-computation in plain Python), so parity at f32 is
            # measured against these.
            logits64 = model64(torch.tensor([ids])).logits[0, -1].numpy()
        top = [int(i) for i in np.argsort(-logits, kind="stable")[:10]]
        n = spec["greedy_tokens"]
        fixed, fixed_m = greedy(model, ids, n, n, EOS_IDS)
        natural, natural_m = greedy(model, ids, 40, 0, stops)
        cases.append({
            "name": pname, "text": text, "prompt_ids": ids,
            "logits_strided_f64": [float(v) for v in logits64[::LOGIT_STRIDE]],
            "top10_logits_f64": [float(logits64[i]) for i in top],
            "top10_ids": top,
            "greedy_fixed": {"max_new_tokens": n, "min_new_tokens": n, "eos_token_ids": EOS_IDS,
                             "ids": fixed, "margins": fixed_m},
            "greedy_stop": {"max_new_tokens": 40, "eos_token_ids": stops, "ids": natural,
                            "margins": natural_m,
                            "stopped": bool(natural and natural[-1] in stops)},
        })
        print(f"[{name}] {pname}: {len(ids)} prompt tokens, fixed {fixed[:6]}..., "
              f"stop after {len(natural)} (stopped={cases[-1]['greedy_stop']['stopped']})", flush=True)
    import transformers
    ref = {
        "generator": "tools/reference/qwen3_reference.py",
        "transformers": transformers.__version__, "torch": torch.__version__,
        "seed": seed, "config_name": name, "vocab_size": VOCAB_SIZE,
        "eos_token_ids": EOS_IDS, "stop_token": stop_token, "logit_stride": LOGIT_STRIDE,
        "weights": "synthetic_weight(name, shape, seed), written by the tests",
        "cases": cases,
    }

    if convert_dir:
        gguf = os.path.join(out_dir, name, "model", "model.gguf")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.path.join(convert_dir, "gguf-py") + os.pathsep + env.get("PYTHONPATH", "")
        r = subprocess.run([sys.executable, os.path.join(convert_dir, "convert_hf_to_gguf.py"), mdir,
                            "--outtype", "bf16", "--outfile", gguf], env=env,
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stdout[-3000:], r.stderr[-3000:], flush=True)
            print(f"[{name}] llama.cpp's converter failed (the HF fixture is kept)", flush=True)
        else:
            print(f"[{name}] model.gguf {os.path.getsize(gguf)} bytes", flush=True)
            ref["gguf_layout"] = gguf_layout(gguf, convert_dir)
    with open(os.path.join(out_dir, name, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1, ensure_ascii=False)
    print(f"[{name}] done in {time.time() - t0:.1f} s", flush=True)


def gguf_layout(path, convert_dir):
    """What llama.cpp's converter wrote, without the data: every key with its value (token
    arrays as their length) and every tensor's name, ggml shape and type."""
    sys.path.insert(0, os.path.join(convert_dir, "gguf-py"))
    import gguf
    r = gguf.GGUFReader(path)
    keys = {}
    for k, f in r.fields.items():
        if k.startswith("GGUF."):
            continue
        try:
            v = f.contents()
        except Exception:
            v = None
        if isinstance(v, list) and len(v) > 16:
            v = {"array_length": len(v)}
        if isinstance(v, (bytes, bytearray)):
            v = v.decode("utf-8", "replace")
        keys[k] = v
    tensors = [{"name": t.name, "ne": [int(x) for x in t.shape], "type": t.tensor_type.name}
               for t in r.tensors]
    return {"keys": keys, "tensors": tensors}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--convert", default=None)
    ap.add_argument("--gguf-configs", default="tiny", help="comma-separated configs to convert")
    ap.add_argument("--tar", default=None)
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.use_deterministic_algorithms(True)
    from transformers import PreTrainedTokenizerFast
    tok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(args.tokenizer_dir, "tokenizer.json"))
    gguf_for = set(args.gguf_configs.split(","))
    for i, (name, spec) in enumerate(CONFIGS.items()):
        run_config(name, spec, tok, args.tokenizer_dir, args.out,
                   args.convert if name in gguf_for else None, args.seed + i)
    if args.tar:
        # The fixtures (config.json + reference.json per config) in one archive; the tiny model as
        # transformers and llama.cpp saved it in another, for checking the tests' writer against
        # (not committed). Each < 16 MiB, the device's limit per file.
        os.makedirs(args.tar, exist_ok=True)
        with tarfile.open(os.path.join(args.tar, "qwen3_fixtures.tar.gz"), "w:gz") as t:
            for name in CONFIGS:
                for f in ("config.json", "reference.json"):
                    t.add(os.path.join(args.out, name, f), arcname=f"qwen3/{name}/{f}")
        with tarfile.open(os.path.join(args.tar, "qwen3_tiny_model.tar.gz"), "w:gz") as t:
            for f in ("config.json", "model.safetensors", "model.gguf"):
                p = os.path.join(args.out, "tiny", "model", f)
                if os.path.exists(p):
                    t.add(p, arcname=f"tiny/{f}")


if __name__ == "__main__":
    main()
