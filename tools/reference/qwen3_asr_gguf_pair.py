#!/usr/bin/env python3
"""llama.cpp's GGUF pair of a Qwen3-ASR fixture, written by the pinned bundle's own converter: the
text model (general.architecture qwen3vl) and the mmproj (clip, projector qwen3a), the form the
published ggml-org/Qwen3-ASR-*-GGUF repositories ship. The tests' GGUF-pair writer
(tests/unit/qwen3_fixture.cpp) follows the layout recorded here, and the files themselves come back
so that parlance can be run on exactly what llama.cpp wrote.

    PYTHONUNBUFFERED=1 python3 tools/reference/qwen3_asr_gguf_pair.py \
        --tokenizer-dir ~/.cache/parlance/assets/qwen3 --convert LLAMA_CPP_DIR --out OUTDIR [--config tiny]

LLAMA_CPP_DIR holds convert_hf_to_gguf.py with its conversion/ and gguf-py/ folders. Writes into
OUTDIR: hf/ (the checkpoint as transformers saves it, bf16), original/ (the same in the toolkit's
layout, which the converter reads), model.gguf (bf16), mmproj.gguf (f16),
mmproj-f32.gguf and gguf_pair_layout.json (every key and tensor of the three files, no data).
Needs torch, transformers 5.17, numpy.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qwen3_asr_reference import CONFIGS, build  # noqa: E402
from qwen3_reference import gguf_layout  # noqa: E402

# Qwen3-ASR's own tokens, as the tests' writer adds them (ids of the published tokenizer.json).
ADDED = [(151669, "<|audio_start|>", True), (151670, "<|audio_end|>", True), (151676, "<|audio_pad|>", True),
         (151704, "<asr_text>", False), (151705, "<timestamp>", True)]


def added_tokens():
    """ADDED plus a placeholder at every other id of 151669..151705. transformers renumbers added
    tokens that leave gaps (the converter then wrote <|audio_pad|> at 151671), and the real
    tokenizer has no gaps there; the placeholders keep every id where the reference has it."""
    have = {i for i, _, _ in ADDED}
    fill = [(i, f"<|parlance_reserved_{i}|>", True) for i in range(151669, 151706) if i not in have]
    return sorted(ADDED + fill)


def save_checkpoint(name, seed, tok_dir, mdir):
    from transformers import Qwen3ASRFeatureExtractor
    model, _ = build(CONFIGS[name], seed)
    model.to(torch.bfloat16).save_pretrained(mdir)
    Qwen3ASRFeatureExtractor().save_pretrained(mdir)
    with open(os.path.join(tok_dir, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    for i, content, special in added_tokens():
        tok["added_tokens"].append({"id": i, "content": content, "single_word": False, "lstrip": False,
                                    "rstrip": False, "normalized": False, "special": special})
    with open(os.path.join(mdir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    with open(os.path.join(tok_dir, "tokenizer_config.json"), encoding="utf-8") as f:
        tc = json.load(f)
    for i, content, special in added_tokens():
        tc["added_tokens_decoder"][str(i)] = {"content": content, "lstrip": False, "normalized": False,
                                              "rstrip": False, "single_word": False, "special": special}
    with open(os.path.join(mdir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tc, f, ensure_ascii=False, indent=1)


def save_original(hf_dir, odir):
    """The same weights in the layout the Qwen3-ASR toolkit published (Qwen/Qwen3-ASR-0.6B): the
    config nested in thinker_config, tensors under thinker., the projector inside the audio tower
    as proj1/proj2. llama.cpp's converter reads this layout only (it looks up thinker_config even
    for a transformers-native -hf checkpoint)."""
    from safetensors.torch import load_file, save_file
    os.makedirs(odir, exist_ok=True)
    with open(os.path.join(hf_dir, "config.json"), encoding="utf-8") as f:
        hf = json.load(f)
    # The published originals' text config carries the multimodal RoPE sections of Qwen3-Omni
    # (transformers' -hf conversion drops them); llama.cpp's qwen3vl loader requires the key they
    # become (qwen3vl.rope.dimension_sections). With equal positions for every section it is
    # plain RoPE, which is what transformers computes.
    text = dict(hf["text_config"])
    mrope = {"mrope_section": [24, 20, 20], "interleaved": True, "mrope_interleaved": True}
    text["rope_parameters"] = dict(text.get("rope_parameters") or {}, **mrope)  # what the converter reads first
    text["rope_scaling"] = dict(mrope, rope_type="default", type="default")
    thinker = {"audio_config": hf["audio_config"], "text_config": text,
               "audio_token_id": hf["audio_token_id"], "model_type": "qwen3_asr_thinker"}
    cfg = {"architectures": ["Qwen3ASRForConditionalGeneration"], "model_type": "qwen3_asr",
           "thinker_config": thinker, "tie_word_embeddings": hf.get("tie_word_embeddings", True)}
    with open(os.path.join(odir, "config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=1)
    renamed = {}
    for k, v in load_file(os.path.join(hf_dir, "model.safetensors")).items():
        k2 = (k.replace("model.audio_tower.", "audio_tower.")
               .replace("model.multi_modal_projector.linear_1.", "audio_tower.proj1.")
               .replace("model.multi_modal_projector.linear_2.", "audio_tower.proj2.")
               .replace("model.language_model.", "model."))
        renamed["thinker." + k2] = v.contiguous()
    save_file(renamed, os.path.join(odir, "model.safetensors"), metadata={"format": "pt"})
    for f in ("tokenizer.json", "tokenizer_config.json", "preprocessor_config.json", "generation_config.json"):
        if os.path.exists(os.path.join(hf_dir, f)):
            shutil.copy(os.path.join(hf_dir, f), odir)


def convert(convert_dir, mdir, out, extra, required=True):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(convert_dir, "gguf-py") + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, os.path.join(convert_dir, "convert_hf_to_gguf.py"), mdir, "--outfile", out] + extra
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    print(" ".join(cmd[1:]), "->", r.returncode, flush=True)
    if r.returncode != 0:
        print(r.stdout[-4000:], r.stderr[-4000:], flush=True)
        if required:
            raise SystemExit(1)
        return r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "failed"
    print(f"  {out}: {os.path.getsize(out)} bytes", flush=True)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer-dir", required=True)
    ap.add_argument("--convert", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--config", default="tiny")
    ap.add_argument("--seed", type=int, default=None, help="default: the reference's (4321 + config index)")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else 4321 + list(CONFIGS).index(args.config)
    os.makedirs(args.out, exist_ok=True)
    mdir = os.path.join(args.out, "hf")
    shutil.rmtree(mdir, ignore_errors=True)
    save_checkpoint(args.config, seed, args.tokenizer_dir, mdir)
    print("saved", sorted(os.listdir(mdir)), flush=True)
    odir = os.path.join(args.out, "original")
    shutil.rmtree(odir, ignore_errors=True)
    save_original(mdir, odir)
    files = {"model.gguf": ["--outtype", "bf16"], "mmproj.gguf": ["--mmproj", "--outtype", "f16"],
             "mmproj-f32.gguf": ["--mmproj", "--outtype", "f32"]}
    layout = {"generator": "tools/reference/qwen3_asr_gguf_pair.py", "config": args.config, "seed": seed,
              "converter": "node-llama-cpp 3.21.1's llama.cpp convert_hf_to_gguf.py", "files": {}}
    for fname, extra in files.items():
        out = os.path.join(args.out, fname)
        convert(args.convert, odir, out, extra)
        layout["files"][fname] = {"arguments": extra, **gguf_layout(out, args.convert)}
    # What the converter does with the transformers-native form of the same checkpoint.
    layout["hf_form_mmproj"] = convert(args.convert, mdir, os.path.join(args.out, "hf-mmproj.gguf"),
                                       ["--mmproj", "--outtype", "f16"], required=False) or "converted"
    with open(os.path.join(args.out, "gguf_pair_layout.json"), "w", encoding="utf-8") as f:
        json.dump(layout, f, indent=1, ensure_ascii=False)


if __name__ == "__main__":
    main()
