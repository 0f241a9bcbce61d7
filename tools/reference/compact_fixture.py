#!/usr/bin/env python3
"""Makes tests/fixtures/whisper/compact: a tiny random-weight Whisper with a compact vocabulary
(3558 tokens: 2048 BPE + Whisper's special tokens + 1501 timestamps), the layout of the
speech model tools/train produces. Its tokenizer.json and generation_config.json are that
recipe's own files (its first run, 2026-11-29); the weights are random (numpy, seed 3), float32,
d_model 16, one encoder and one decoder layer. It tests that parlance loads a vocabulary that is
not OpenAI's layout: ids from generation_config.json and tokenizer.json, not from 51864.

  python3 tools/reference/compact_fixture.py --from MODEL_DIR --out tests/fixtures/whisper/compact/model
"""
import argparse
import json
import os
import shutil
import struct

import numpy as np

D, FFN, HEADS, LAYERS = 16, 32, 2, 1


def shapes(vocab, mels=80):
    s = {"model.encoder.conv1.weight": (D, mels, 3), "model.encoder.conv1.bias": (D,),
         "model.encoder.conv2.weight": (D, D, 3), "model.encoder.conv2.bias": (D,),
         "model.encoder.embed_positions.weight": (1500, D),
         "model.encoder.layer_norm.weight": (D,), "model.encoder.layer_norm.bias": (D,),
         "model.decoder.embed_tokens.weight": (vocab, D), "model.decoder.embed_positions.weight": (448, D),
         "model.decoder.layer_norm.weight": (D,), "model.decoder.layer_norm.bias": (D,)}
    for stack in ("encoder", "decoder"):
        for i in range(LAYERS):
            p = "model.%s.layers.%d." % (stack, i)
            attns = ["self_attn"] + (["encoder_attn"] if stack == "decoder" else [])
            for a in attns:
                for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
                    s[p + a + "." + proj + ".weight"] = (D, D)
                    if proj != "k_proj":
                        s[p + a + "." + proj + ".bias"] = (D,)
                s[p + a + "_layer_norm.weight"] = (D,)
                s[p + a + "_layer_norm.bias"] = (D,)
            s[p + "fc1.weight"] = (FFN, D)
            s[p + "fc1.bias"] = (FFN,)
            s[p + "fc2.weight"] = (D, FFN)
            s[p + "fc2.bias"] = (D,)
            s[p + "final_layer_norm.weight"] = (D,)
            s[p + "final_layer_norm.bias"] = (D,)
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--from", dest="src", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    cfg = json.load(open(os.path.join(args.src, "config.json")))
    cfg.update({"d_model": D, "encoder_ffn_dim": FFN, "decoder_ffn_dim": FFN, "encoder_layers": LAYERS,
                "decoder_layers": LAYERS, "encoder_attention_heads": HEADS, "decoder_attention_heads": HEADS,
                "dtype": "float32", "classifier_proj_size": D})
    gen = json.load(open(os.path.join(args.src, "generation_config.json")))
    gen["alignment_heads"] = [[0, 0], [0, 1]]
    os.makedirs(args.out, exist_ok=True)
    json.dump(cfg, open(os.path.join(args.out, "config.json"), "w"), indent=1)
    json.dump(gen, open(os.path.join(args.out, "generation_config.json"), "w"), indent=1)
    for name in ("tokenizer.json", "tokenizer_config.json", "preprocessor_config.json"):
        shutil.copy(os.path.join(args.src, name), args.out)
    rng = np.random.default_rng(3)
    header, blobs, offset = {}, [], 0
    for name, shape in sorted(shapes(cfg["vocab_size"], cfg["num_mel_bins"]).items()):
        if name.endswith("layer_norm.weight"):
            x = 1.0 + 0.1 * rng.standard_normal(shape)
        else:
            x = 0.2 * rng.standard_normal(shape)
        b = x.astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(os.path.join(args.out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


if __name__ == "__main__":
    main()
