#!/usr/bin/env python3
"""Whisper reference generator: random-init checkpoints of the real Whisper layouts
plus transformers' outputs on them, the fixtures our C++ Whisper is proven against.

    python3 tools/reference/gguf_vocab.py ggml-vocab-gpt-2.gguf --out /tmp/vocab
    PYTHONUNBUFFERED=1 python3 tools/reference/whisper_reference.py \
        --vocab-dir /tmp/vocab --audio-dir tests/fixtures/audio --out OUTDIR [--tar TARDIR]

Needs torch, transformers (5.x; written against the 4.4x-5.x WhisperGenerationMixin),
tokenizers, numpy. Runs on CPU in float32 (no TF32), deterministic, fixed seeds.
See tools/reference/README.md for the output layout and the reference.json schema.
"""

import argparse
import copy
import hashlib
import inspect
import json
import math
import os
import platform
import shutil
import sys
import tarfile
import time
import traceback
import wave

import numpy as np
import torch

SR = 16000
HOP = 160
MB = 1024 * 1024

# ----------------------------------------------------------------------------------------------
# Token layout
# ----------------------------------------------------------------------------------------------
# Whisper's 100 language codes in id order (the first 99 for v1/v2 layouts, + "yue" for v3).
LANG_CODES = [
    "en", "zh", "de", "es", "ru", "ko", "fr", "ja", "pt", "tr", "pl", "ca", "nl", "ar", "sv", "it",
    "id", "hi", "fi", "vi", "he", "uk", "el", "ms", "cs", "ro", "da", "hu", "ta", "no", "th", "ur",
    "hr", "bg", "lt", "la", "mi", "ml", "cy", "sk", "te", "fa", "lv", "bn", "sr", "az", "sl", "kn",
    "et", "mk", "br", "eu", "is", "hy", "ne", "mn", "bs", "kk", "sq", "sw", "gl", "mr", "pa", "si",
    "km", "sn", "yo", "so", "af", "oc", "ka", "be", "tg", "sd", "gu", "am", "yi", "lo", "uz", "fo",
    "ht", "ps", "tk", "nn", "mt", "sa", "lb", "my", "bo", "tl", "mg", "as", "tt", "haw", "ln", "ha",
    "ba", "jw", "su", "yue",
]
assert len(LANG_CODES) == 100

# suppress_tokens of the real generation_config.json files (openai/whisper-tiny.en,
# openai/whisper-tiny (all v1/v2 multilingual), openai/whisper-large-v3). The text-token part is
# the same for the two multilingual layouts; the tail lists the special tokens of each layout.
SUPPRESS_EN = [
    1, 2, 7, 8, 9, 10, 14, 25, 26, 27, 28, 29, 31, 58, 59, 60, 61, 62, 63, 90, 91, 92, 93, 357, 366,
    438, 532, 685, 705, 796, 930, 1058, 1220, 1267, 1279, 1303, 1343, 1377, 1391, 1635, 1782, 1875,
    2162, 2361, 2488, 3467, 4008, 4211, 4600, 4808, 5299, 5855, 6329, 7203, 9609, 9959, 10563, 10786,
    11420, 11709, 11907, 13163, 13697, 13700, 14808, 15306, 16410, 16791, 17992, 19203, 19510, 20724,
    22305, 22935, 27007, 30109, 30420, 33409, 34949, 40283, 40493, 40549, 47282, 49146,
    50257, 50357, 50358, 50359, 50360, 50361,
]
_SUPPRESS_MULTI_TEXT = [
    1, 2, 7, 8, 9, 10, 14, 25, 26, 27, 28, 29, 31, 58, 59, 60, 61, 62, 63, 90, 91, 92, 93, 359, 503,
    522, 542, 873, 893, 902, 918, 922, 931, 1350, 1853, 1982, 2460, 2627, 3246, 3253, 3268, 3536,
    3846, 3961, 4183, 4667, 6585, 6647, 7273, 9061, 9383, 10428, 10929, 11938, 12033, 12331, 12562,
    13793, 14157, 14635, 15265, 15618, 16553, 16604, 18362, 18956, 20075, 21675, 22520, 26130, 26161,
    26435, 28279, 29464, 31650, 32302, 32470, 36865, 42863, 47425, 49870, 50254,
]
SUPPRESS_MULTI = _SUPPRESS_MULTI_TEXT + [50258, 50358, 50359, 50360, 50361, 50362]
SUPPRESS_V3 = _SUPPRESS_MULTI_TEXT + [50258, 50359, 50360, 50361, 50362, 50363]
assert len(SUPPRESS_EN) == 90 and len(SUPPRESS_MULTI) == 88 and len(SUPPRESS_V3) == 88

FILLER_TOKEN = "\u0120parlancefiller"  # the extra text token of the multilingual layouts (id 50256)


def token_layout(kind):
    """Special-token ids of a layout. kind: 'en' (51864), 'multi' (51865), 'v3' (51866)."""
    n_text = {"en": 50256, "multi": 50257, "v3": 50257}[kind]  # ids below <|endoftext|>
    n_lang = 100 if kind == "v3" else 99
    eot = n_text
    sot = eot + 1
    langs = {"<|%s|>" % c: sot + 1 + i for i, c in enumerate(LANG_CODES[:n_lang])}
    nxt = sot + 1 + n_lang
    L = {
        "kind": kind,
        "eot": eot, "sot": sot,
        "translate": nxt, "transcribe": nxt + 1, "startoflm": nxt + 2, "startofprev": nxt + 3,
        "nospeech": nxt + 4, "notimestamps": nxt + 5, "timestamp_begin": nxt + 6,
        "lang_to_id": langs,
        "nospeech_token": "<|nospeech|>" if kind == "v3" else "<|nocaptions|>",
    }
    L["timestamp_end"] = L["timestamp_begin"] + 1500  # <|30.00|>
    L["vocab_size"] = L["timestamp_end"] + 1
    return L


# Expected numbers (real files: openai/whisper-tiny.en, -tiny, -large-v3 generation_config.json)
_EXPECT = {
    "en": dict(eot=50256, sot=50257, translate=50357, transcribe=50358, startofprev=50360,
               nospeech=50361, notimestamps=50362, timestamp_begin=50363, vocab_size=51864),
    "multi": dict(eot=50257, sot=50258, translate=50358, transcribe=50359, startofprev=50361,
                  nospeech=50362, notimestamps=50363, timestamp_begin=50364, vocab_size=51865),
    "v3": dict(eot=50257, sot=50258, translate=50359, transcribe=50360, startofprev=50362,
               nospeech=50363, notimestamps=50364, timestamp_begin=50365, vocab_size=51866),
}
for _k, _e in _EXPECT.items():
    _L = token_layout(_k)
    for _f, _v in _e.items():
        assert _L[_f] == _v, (_k, _f, _L[_f], _v)
assert token_layout("v3")["lang_to_id"]["<|yue|>"] == 50358
assert token_layout("multi")["lang_to_id"]["<|en|>"] == 50259
assert token_layout("en")["lang_to_id"]["<|en|>"] == 50258

CONFIGS = [
    dict(name="tiny-multi", kind="multi", d_model=32, encoder_layers=2, decoder_layers=2,
         heads=2, ffn=64, n_mels=80, longform=True, seed=1001),
    dict(name="tiny-en", kind="en", d_model=32, encoder_layers=1, decoder_layers=3,
         heads=4, ffn=96, n_mels=80, longform=True, seed=1002),
    dict(name="v3-layout", kind="v3", d_model=40, encoder_layers=8, decoder_layers=4,
         heads=20, ffn=80, n_mels=128, longform=False, seed=1003),
]

# Random init (our own, deterministic across transformers versions; see README):
INIT_STD = 0.25        # Linear / Conv1d weights, decoder positional embedding
EMBED_STD = 0.5        # token embedding = tied output projection: logit std = sqrt(d_model) * 0.5
BIAS_STD = 0.1         # all biases (so a missing bias is a visible error)
LN_STD = 0.1           # LayerNorm weight = 1 + N(0, LN_STD), bias = N(0, LN_STD)


# ----------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------
def log(*a):
    print(*a, flush=True)


def read_wav(path):
    with wave.open(path, "rb") as w:
        ch, sw, sr, n = w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getnframes()
        if ch != 1 or sw != 2 or sr != SR:
            raise ValueError("%s: need 16-bit PCM mono 16 kHz, got channels=%d width=%d rate=%d" % (path, ch, sw, sr))
        pcm = np.frombuffer(w.readframes(n), dtype="<i2")
    return pcm


def write_wav(path, pcm):
    pcm = np.asarray(pcm, dtype="<i2")
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SR)
        w.writeframes(pcm.tobytes())


def pcm_to_float(pcm):
    return (pcm.astype(np.float32) / np.float32(32768.0)).astype(np.float32)


def synthetic_pcm(seconds=7.0, seed=4242):
    """Deterministic chirp (100 Hz -> 4 kHz, exponential) + amplitude wobble + white noise."""
    rng = np.random.RandomState(seed)
    n = int(seconds * SR)
    t = np.arange(n, dtype=np.float64) / SR
    f0, f1 = 100.0, 4000.0
    k = math.log(f1 / f0) / seconds
    phase = 2 * math.pi * f0 * (np.exp(k * t) - 1) / k
    env = 0.35 * (0.6 + 0.4 * np.sin(2 * math.pi * 1.5 * t))
    x = env * np.sin(phase) + 0.03 * rng.randn(n)
    return np.clip(np.round(x * 32767.0), -32768, 32767).astype("<i2")


def sha256_bytes(b):
    return hashlib.sha256(b).hexdigest()


def write_f32(path, arr):
    a = np.ascontiguousarray(np.asarray(arr, dtype="<f4"))
    a.tofile(path)
    return {"file": os.path.basename(path), "shape": list(a.shape), "dtype": "float32_le",
            "sha256": sha256_bytes(a.tobytes())}


def tolist_ids(t):
    if isinstance(t, torch.Tensor):
        return [int(x) for x in t.reshape(-1).tolist()]
    return [int(x) for x in t]


def step_stats(scores):
    """Per decoding step: top-1 id, top-1 processed score and top-1 - top-2 margin.
    scores: sequence of tensors [vocab] or [1, vocab] (processed logits / log-probs)."""
    top1_ids, top1_vals, margins = [], [], []
    for s in scores:
        s = s.detach().reshape(-1).float()
        v, i = torch.topk(s, 2)
        top1_ids.append(int(i[0]))
        top1_vals.append(float(v[0]) if math.isfinite(float(v[0])) else None)
        m = float(v[0] - v[1]) if math.isfinite(float(v[1])) else None  # None: one finite candidate
        margins.append(m)
    return top1_ids, top1_vals, margins


def get_field(out, key):
    if out is None:
        return None
    if isinstance(out, dict):
        return out.get(key)
    try:
        return out[key]
    except (KeyError, TypeError, IndexError):
        return getattr(out, key, None)


def split_prompt(seq, prompt):
    """Split a returned sequence into (prompt_ids, generated_ids, prompt_included)."""
    seq = list(seq)
    if len(seq) >= len(prompt) and seq[:len(prompt)] == list(prompt):
        return list(prompt), seq[len(prompt):], True
    return [], seq, False


class Skip(Exception):
    pass


# ----------------------------------------------------------------------------------------------
# tokenizer
# ----------------------------------------------------------------------------------------------
def load_gpt2_vocab(vocab_dir):
    with open(os.path.join(vocab_dir, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    merges = []
    with open(os.path.join(vocab_dir, "merges.txt"), encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#version"):
                continue
            a, b = line.split(" ")
            merges.append((a, b))
    if len(vocab) != 50257 or vocab.get("<|endoftext|>") != 50256:
        raise SystemExit("vocab.json is not GPT-2's 50257 tokens with <|endoftext|> = 50256")
    return vocab, merges


def build_tokenizer(L, gpt2_vocab, merges, out_dir):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    try:
        from transformers import WhisperTokenizerFast
    except ImportError:  # transformers versions without a separate fast class
        from transformers import WhisperTokenizer as WhisperTokenizerFast
        log("  note: no WhisperTokenizerFast; using WhisperTokenizer(tokenizer_object=...)")

    vocab = {t: i for t, i in gpt2_vocab.items() if i < 50256}
    if L["kind"] == "en":
        vocab["<|endoftext|>"] = 50256
    else:
        if FILLER_TOKEN in gpt2_vocab:
            raise SystemExit("filler token already in the GPT-2 vocabulary")
        vocab[FILLER_TOKEN] = 50256
        vocab["<|endoftext|>"] = 50257
    assert sorted(vocab.values()) == list(range(L["eot"] + 1))

    stamps = ["<|%.2f|>" % (i * 0.02) for i in range(1501)]
    specials = ["<|endoftext|>", "<|startoftranscript|>"] + list(L["lang_to_id"].keys()) + [
        "<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", L["nospeech_token"],
        "<|notimestamps|>"]
    # Put every special and timestamp token into the BPE vocabulary at its exact id too, so the
    # added-token registration below finds the id instead of allocating one (allocation rules
    # differ between tokenizers versions). No merge produces these strings.
    for i, s in enumerate(specials + stamps):
        vocab.setdefault(s, L["eot"] + i)
    if sorted(vocab.values()) != list(range(L["vocab_size"])):
        raise SystemExit("internal error: vocabulary ids are not 0..%d" % (L["vocab_size"] - 1))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()

    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    tok.add_tokens([AddedToken(s, special=False, normalized=False) for s in stamps])

    expect = {"<|endoftext|>": L["eot"], "<|startoftranscript|>": L["sot"],
              "<|translate|>": L["translate"], "<|transcribe|>": L["transcribe"],
              "<|startoflm|>": L["startoflm"], "<|startofprev|>": L["startofprev"],
              L["nospeech_token"]: L["nospeech"], "<|notimestamps|>": L["notimestamps"],
              "<|0.00|>": L["timestamp_begin"], "<|30.00|>": L["timestamp_end"]}
    expect.update(L["lang_to_id"])
    for i, s in enumerate(stamps):
        expect[s] = L["timestamp_begin"] + i
    for s, i in expect.items():
        got = tok.token_to_id(s)
        if got != i:
            raise SystemExit("tokenizer layout error: %s -> %s, expected %d" % (s, got, i))

    hf = WhisperTokenizerFast(tokenizer_object=tok, unk_token="<|endoftext|>", bos_token="<|endoftext|>",
                              eos_token="<|endoftext|>", pad_token="<|endoftext|>", add_prefix_space=False)
    full = hf.get_vocab()
    if len(full) != L["vocab_size"] or max(full.values()) != L["vocab_size"] - 1:
        raise SystemExit("tokenizer has %d entries (max id %d), expected %d" %
                         (len(full), max(full.values()), L["vocab_size"]))
    if len(hf) != L["vocab_size"]:
        log("  WARNING: len(tokenizer) = %d but get_vocab() has the expected %d ids (added tokens that "
            "are also in the BPE vocab may be double counted by this tokenizers version)" % (len(hf), L["vocab_size"]))
    spot = {"<|en|>": L["lang_to_id"]["<|en|>"], "<|transcribe|>": L["transcribe"],
            "<|notimestamps|>": L["notimestamps"], "<|0.00|>": L["timestamp_begin"],
            "<|30.00|>": L["timestamp_end"], "<|endoftext|>": L["eot"], "<|startoftranscript|>": L["sot"]}
    for s, i in spot.items():
        got = hf.convert_tokens_to_ids(s)
        if got != i:
            raise SystemExit("WhisperTokenizerFast: %s -> %s, expected %d" % (s, got, i))
    enc = hf.encode(" hello world", add_special_tokens=False)
    log("  tokenizer ok: %d ids, ' hello world' -> %s" % (len(full), enc))
    hf.save_pretrained(out_dir)
    if not os.path.exists(os.path.join(out_dir, "tokenizer.json")):
        raise SystemExit("save_pretrained did not write tokenizer.json")
    return hf, spot, enc


# ----------------------------------------------------------------------------------------------
# model
# ----------------------------------------------------------------------------------------------
def sinusoids(length, channels, max_timescale=10000.0):
    log_inc = math.log(max_timescale) / (channels // 2 - 1)
    inv = torch.exp(-log_inc * torch.arange(channels // 2, dtype=torch.float32))
    t = torch.arange(length, dtype=torch.float32).view(-1, 1) * inv.view(1, -1)
    return torch.cat([t.sin(), t.cos()], dim=1)


def generation_config_dict(cfg, L):
    kind = L["kind"]
    n_dec, heads = cfg["decoder_layers"], cfg["heads"]
    align = [[l, h] for l in range(max(0, n_dec - 2), n_dec) for h in range(heads)]
    g = {
        "alignment_heads": align,
        "begin_suppress_tokens": [220, L["eot"]],
        "bos_token_id": L["eot"] if kind != "en" else L["sot"],
        "decoder_start_token_id": L["sot"],
        "eos_token_id": L["eot"],
        "forced_decoder_ids": None,
        "is_multilingual": kind != "en",
        "max_initial_timestamp_index": 50,
        "max_length": 448,
        "no_timestamps_token_id": L["notimestamps"],
        "pad_token_id": L["eot"],
        "prev_sot_token_id": L["startofprev"],
        "return_timestamps": False,
        "suppress_tokens": {"en": SUPPRESS_EN, "multi": SUPPRESS_MULTI, "v3": SUPPRESS_V3}[kind],
    }
    if kind != "en":  # the real .en generation configs have neither (else generate() detects language)
        g["lang_to_id"] = dict(L["lang_to_id"])
        g["task_to_id"] = {"translate": L["translate"], "transcribe": L["transcribe"]}
    return g


def build_model(cfg, L, model_dir):
    from transformers import GenerationConfig, WhisperConfig, WhisperFeatureExtractor, WhisperForConditionalGeneration

    kw = dict(
        vocab_size=L["vocab_size"], num_mel_bins=cfg["n_mels"], d_model=cfg["d_model"],
        encoder_layers=cfg["encoder_layers"], decoder_layers=cfg["decoder_layers"],
        encoder_attention_heads=cfg["heads"], decoder_attention_heads=cfg["heads"],
        encoder_ffn_dim=cfg["ffn"], decoder_ffn_dim=cfg["ffn"],
        max_source_positions=1500, max_target_positions=448,
        pad_token_id=L["eot"], bos_token_id=L["eot"] if L["kind"] != "en" else L["sot"],
        eos_token_id=L["eot"], decoder_start_token_id=L["sot"],
        init_std=INIT_STD, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
        tie_word_embeddings=True, scale_embedding=False, median_filter_width=7,
    )
    try:
        config = WhisperConfig(attn_implementation="eager", **kw)
    except TypeError:
        config = WhisperConfig(**kw)
        config._attn_implementation = "eager"
    torch.manual_seed(cfg["seed"])
    model = WhisperForConditionalGeneration(config)
    if hasattr(model, "set_attn_implementation"):
        try:
            model.set_attn_implementation("eager")
        except Exception as e:  # noqa: BLE001
            log("  note: set_attn_implementation('eager') failed: %r" % (e,))
    log("  attention implementation: %s" % getattr(model.config, "_attn_implementation", "?"))
    model.eval()

    # Our own deterministic init (independent of the transformers version's _init_weights).
    g = torch.Generator().manual_seed(cfg["seed"])
    with torch.no_grad():
        for name, p in model.named_parameters():  # tied parameters appear once
            if name.endswith("encoder.embed_positions.weight"):
                p.copy_(sinusoids(p.shape[0], p.shape[1]))
            elif "layer_norm" in name:
                r = torch.randn(p.shape, generator=g) * LN_STD
                p.copy_(1.0 + r if name.endswith("weight") else r)
            elif name.endswith("embed_tokens.weight"):
                p.copy_(torch.randn(p.shape, generator=g) * EMBED_STD)
            elif name.endswith("bias"):
                p.copy_(torch.randn(p.shape, generator=g) * BIAS_STD)
            else:
                p.copy_(torch.randn(p.shape, generator=g) * INIT_STD)
    emb = model.model.decoder.embed_tokens.weight
    if model.proj_out.weight.data_ptr() != emb.data_ptr():
        model.tie_weights()
    if model.proj_out.weight.data_ptr() != emb.data_ptr():
        raise SystemExit("proj_out is not tied to decoder.embed_tokens")
    for name, p in model.named_parameters():
        if p.dtype != torch.float32 or not torch.isfinite(p).all():
            raise SystemExit("bad parameter %s" % name)

    os.makedirs(model_dir, exist_ok=True)
    model.save_pretrained(model_dir, safe_serialization=True)
    gdict = generation_config_dict(cfg, L)
    with open(os.path.join(model_dir, "generation_config.json"), "w") as f:
        json.dump(dict(gdict, transformers_version=__import__("transformers").__version__), f, indent=2)
    gc = GenerationConfig.from_pretrained(model_dir)
    for k in ("lang_to_id", "task_to_id", "is_multilingual", "no_timestamps_token_id", "alignment_heads",
              "suppress_tokens", "begin_suppress_tokens", "prev_sot_token_id"):
        if k in gdict and getattr(gc, k, None) != gdict[k]:
            raise SystemExit("GenerationConfig did not keep %s (got %r)" % (k, getattr(gc, k, None)))
    model.generation_config = gc
    fe = WhisperFeatureExtractor(feature_size=cfg["n_mels"])
    fe.save_pretrained(model_dir)

    st = os.path.join(model_dir, "model.safetensors")
    if not os.path.exists(st):
        raise SystemExit("save_pretrained wrote no model.safetensors: %s" % os.listdir(model_dir))
    size = os.path.getsize(st)
    log("  model.safetensors: %.2f MB, files: %s" % (size / MB, sorted(os.listdir(model_dir))))
    if size >= 10 * MB:
        raise SystemExit("model.safetensors is %.2f MB (>= 10 MB): tie lost?" % (size / MB))
    from safetensors import safe_open
    with safe_open(st, framework="pt") as f:
        keys = list(f.keys())
        try:
            dtypes = {str(f.get_slice(k).get_dtype()) for k in keys}
        except Exception:  # noqa: BLE001
            dtypes = {str(f.get_tensor(k).dtype) for k in keys}
    if any(k.startswith("proj_out") for k in keys):
        log("  note: proj_out.weight stored separately in the checkpoint")
    log("  checkpoint tensors: %d, dtypes %s" % (len(keys), sorted(dtypes)))
    n_params = sum(p.numel() for p in model.parameters())
    return model, gc, fe, gdict, {"safetensors_bytes": size, "n_params": n_params, "tensors": len(keys)}


# ----------------------------------------------------------------------------------------------
# cases
# ----------------------------------------------------------------------------------------------
class Runner:
    def __init__(self, model, gc, fe, tok, L, cfg):
        self.model, self.gc, self.fe, self.tok, self.L, self.cfg = model, gc, fe, tok, L, cfg
        self.multi = L["kind"] != "en"
        self.gen_params = set(inspect.signature(model.generate).parameters)
        self.lang_kw = {"language": "en", "task": "transcribe"} if self.multi else {}

    def prompt(self, timestamps):
        L = self.L
        p = [L["sot"]]
        if self.multi:
            p += [L["lang_to_id"]["<|en|>"], L["transcribe"]]
        if not timestamps:
            p.append(L["notimestamps"])
        return p

    def decode(self, ids):
        try:
            return self.tok.decode(ids, skip_special_tokens=False)
        except Exception as e:  # noqa: BLE001
            return "<decode failed: %r>" % (e,)

    def generate(self, feats, **kw):
        for k in ("return_segments", "return_token_timestamps", "condition_on_prev_tokens", "temperature"):
            if k in kw and k not in self.gen_params and "kwargs" not in self.gen_params:
                raise Skip("generate() has no parameter %s" % k)
        with torch.no_grad():
            return self.model.generate(feats, generation_config=copy.deepcopy(self.gc), **kw)

    def greedy_or_beam(self, feats, num_beams, max_new, min_new):
        kw = dict(do_sample=False, num_beams=num_beams, max_new_tokens=max_new, return_timestamps=False,
                  output_scores=True, return_dict_in_generate=True, **self.lang_kw)
        if min_new:
            kw["min_new_tokens"] = min_new
        out = self.generate(feats, **kw)
        seqs = get_field(out, "sequences")
        if seqs is None:
            raise RuntimeError("generate returned no sequences (type %s)" % type(out).__name__)
        seq = tolist_ids(seqs[0])
        expect_prompt = self.prompt(False)
        prompt, gen, included = split_prompt(seq, expect_prompt)
        scores = get_field(out, "scores") or []
        top1, top1v, margins = step_stats(scores)
        eot = self.L["eot"]
        res = {"status": "ok", "params": {"num_beams": num_beams, "max_new_tokens": max_new,
                                          "min_new_tokens": min_new, "do_sample": False,
                                          "return_timestamps": False},
               "prompt_ids": expect_prompt, "prompt_in_sequences": included,
               "sequences": seq, "generated_ids": gen,
               "ended_with_eot": bool(gen and gen[-1] == eot),
               "text": self.decode(gen),
               "step_margins": margins, "step_top1_ids": top1, "step_top1_scores": top1v}
        if num_beams == 1:
            res["score_kind"] = "processed logits (after all logits processors)"
            # consistency: greedy token == argmax of processed scores at every step
            if len(scores) != len(gen):
                raise RuntimeError("greedy: %d scores for %d generated tokens (seq %s)" % (len(scores), len(gen), seq))
            if top1 != gen:
                raise RuntimeError("greedy: generated ids %s != argmax of scores %s" % (gen, top1))
            if min_new:
                if len(gen) != max_new or eot in gen:
                    raise RuntimeError("fixed-length greedy produced %d tokens / eot" % len(gen))
        else:
            res["score_kind"] = ("processed log-probs of the selected beam at each step "
                                 "(Whisper re-selects rows by beam_indices)")
            res["length_penalty"] = getattr(self.gc, "length_penalty", None)
            res["early_stopping"] = getattr(self.gc, "early_stopping", None)
            ss = get_field(out, "sequences_scores")
            res["sequences_score"] = float(ss.reshape(-1)[0]) if isinstance(ss, torch.Tensor) else None
            bi = get_field(out, "beam_indices")
            res["beam_indices"] = tolist_ids(bi[0]) if isinstance(bi, torch.Tensor) else None
            if not included:
                res["note"] = "sequences did not start with the prompt; generated_ids = sequences"
                log("    note: beam sequences do not start with the prompt %s" % expect_prompt)
            if min_new and (len(gen) != max_new or eot in gen):
                raise RuntimeError("fixed-length beam produced %d tokens / eot: %s" % (len(gen), gen))
        return res

    def _calls_from_segments(self, segments, prompt):
        """Group segments by their underlying generate() call; per call: prompt, generated ids, margins."""
        calls, seg_out, seen = [], [], {}
        for s in segments:
            r = s.get("result")
            key = id(r)
            if r is not None and key not in seen:
                seen[key] = len(calls)
                rseq = get_field(r, "sequences")
                rscores = get_field(r, "scores")
                call = {}
                if isinstance(rseq, torch.Tensor):
                    full = tolist_ids(rseq)
                    n = len(rscores) if rscores is not None else None
                    call["sequences"] = full
                    if n is not None and n <= len(full):
                        call["decoder_input_ids"] = full[:len(full) - n]
                        call["generated_ids"] = full[len(full) - n:]
                    else:
                        p, gids, _ = split_prompt(full, prompt)
                        call["decoder_input_ids"] = p
                        call["generated_ids"] = gids
                if rscores is not None:
                    t1, t1v, m = step_stats(rscores)
                    call["step_margins"], call["step_top1_ids"], call["step_top1_scores"] = m, t1, t1v
                    if "generated_ids" in call and t1 != call["generated_ids"]:
                        raise RuntimeError("timestamps: generated ids != argmax of scores")
                calls.append(call)
            idxs = s.get("idxs")
            seg_out.append({
                "start": float(s["start"]), "end": float(s["end"]),
                "tokens": tolist_ids(s["tokens"]),
                "idxs": [int(idxs[0]), int(idxs[1])] if idxs is not None else None,
                "call": seen.get(key),
            })
        return calls, seg_out

    def timestamps(self, feats, max_new=24, attention_mask=None, longform=False):
        kw = dict(do_sample=False, num_beams=1, max_new_tokens=max_new, return_timestamps=True,
                  output_scores=True, return_dict_in_generate=True, return_segments=True, **self.lang_kw)
        if longform:
            kw.update(condition_on_prev_tokens=False, temperature=0.0)
            if attention_mask is not None:
                kw["attention_mask"] = attention_mask
        out = self.generate(feats, **kw)
        prompt = self.prompt(True)
        seqs = get_field(out, "sequences")
        segs = get_field(out, "segments")
        res = {"status": "ok",
               "params": {"max_new_tokens": max_new, "return_timestamps": True, "num_beams": 1,
                          "do_sample": False},
               "prompt_ids": prompt,
               "sequences": tolist_ids(seqs[0]) if isinstance(seqs, torch.Tensor) else None,
               "sequences_note": "transformers' final sequences: segment tokens concatenated, no prompt, no eot"}
        if longform:
            res["params"].update(condition_on_prev_tokens=False, temperature=0.0)
        if segs is None:
            res["segments"] = None
            res["note"] = "generate returned no segments"
            return res
        calls, seg_out = self._calls_from_segments(segs[0], prompt)
        res["calls"] = calls
        res["segments"] = seg_out
        if res["sequences"] is not None:
            res["text"] = self.decode(res["sequences"])
        return res

    def word_timestamps(self, feats, num_frames=None):
        kw = dict(do_sample=False, num_beams=1, max_new_tokens=16, min_new_tokens=16, return_timestamps=False,
                  return_token_timestamps=True, output_scores=True, return_dict_in_generate=True, **self.lang_kw)
        if num_frames is not None:
            kw["num_frames"] = num_frames
        out = self.generate(feats, **kw)
        seqs = get_field(out, "sequences")
        tts = get_field(out, "token_timestamps")
        if seqs is None or tts is None:
            raise RuntimeError("no sequences/token_timestamps in output (keys: %s)" %
                               (list(out.keys()) if hasattr(out, "keys") else type(out).__name__))
        seq = tolist_ids(seqs[0])
        ts = [float(x) for x in tts[0].reshape(-1).tolist()]
        prompt, gen, included = split_prompt(seq, self.prompt(False))
        res = {"status": "ok",
               "params": {"max_new_tokens": 16, "min_new_tokens": 16, "return_timestamps": False,
                          "num_frames": num_frames, "median_filter_width": self.model.config.median_filter_width,
                          "alignment_heads": self.gc.alignment_heads, "time_precision": 0.02},
               "prompt_ids": self.prompt(False), "prompt_in_sequences": included,
               "sequences": seq, "generated_ids": gen, "token_timestamps": ts,
               "token_timestamps_aligned_with": "sequences" if len(ts) == len(seq) else
               ("generated_ids" if len(ts) == len(gen) else "unknown")}
        if res["token_timestamps_aligned_with"] == "unknown":
            res["note"] = "len(token_timestamps)=%d, len(sequences)=%d" % (len(ts), len(seq))
        return res

    def language(self, feats):
        L = self.L
        ids = list(L["lang_to_id"].values())
        names = list(L["lang_to_id"].keys())
        with torch.no_grad():
            logits = self.model(input_features=feats,
                                decoder_input_ids=torch.tensor([[L["sot"]]]), use_cache=False).logits[0, -1].float()
        full = torch.softmax(logits, dim=-1)[ids]
        lang_logits = logits[ids]
        probs = torch.softmax(lang_logits, dim=-1)  # == mask non-language logits to -inf, then softmax
        order = torch.argsort(probs, descending=True)[:5].tolist()
        top = [{"token": names[i], "id": ids[i], "prob": float(probs[i]), "prob_full_vocab": float(full[i]),
                "logit": float(lang_logits[i])} for i in order]
        res = {"status": "ok", "top5": top, "detected": names[order[0]], "detected_id": ids[order[0]],
               "margin_top2_logit": float(lang_logits[order[0]] - lang_logits[order[1]]),
               "method": "logits after [sot] (no processors); prob = softmax over the language tokens only "
                         "(OpenAI detect_language); prob_full_vocab = softmax over all logits"}
        try:
            with torch.no_grad():
                det = self.model.detect_language(input_features=feats, generation_config=copy.deepcopy(self.gc))
            res["transformers_detect_language_id"] = int(det.reshape(-1)[0])
            if res["transformers_detect_language_id"] != res["detected_id"]:
                raise RuntimeError("detect_language() says %d, our argmax %d" % (res["transformers_detect_language_id"],
                                                                                res["detected_id"]))
        except RuntimeError:
            raise
        except Exception as e:  # noqa: BLE001
            res["note"] = "model.detect_language not comparable: %r" % (e,)
        return res

    def first_step(self, feats):
        """Raw decoder logits after the fixed no-timestamps prompt (before any processor)."""
        p = self.prompt(False)
        with torch.no_grad():
            logits = self.model(input_features=feats, decoder_input_ids=torch.tensor([p]),
                                use_cache=False).logits[0].float()
        last = logits[-1]
        v, i = torch.topk(last, 5)
        probe = sorted({0, 1, 220, 1000, 30000, self.L["eot"], self.L["sot"], self.L["notimestamps"],
                        self.L["timestamp_begin"], self.L["vocab_size"] - 1})
        return {"prompt_ids": p, "top5_ids": tolist_ids(i), "top5_logits": [float(x) for x in v],
                "mean": float(last.mean()), "std": float(last.std(unbiased=False)),
                "probe_ids": probe, "probe_logits": [float(last[j]) for j in probe],
                "per_position_argmax": tolist_ids(torch.argmax(logits, dim=-1))}


def run_case(name, fn, failures, core):
    t0 = time.time()
    try:
        res = fn()
    except Skip as e:
        log("    %-22s SKIPPED: %s" % (name, e))
        return {"status": "skipped", "note": str(e)}
    except Exception as e:  # noqa: BLE001
        log("    %-22s ERROR: %r" % (name, e))
        traceback.print_exc()
        failures.append((name, repr(e), core))
        return {"status": "error", "note": repr(e)}
    dt = time.time() - t0
    extra = ""
    if isinstance(res, dict):
        if "generated_ids" in res:
            m = [x for x in res.get("step_margins", []) if x is not None]
            extra = "%d tokens, min margin %s" % (len(res["generated_ids"]), ("%.3g" % min(m)) if m else "-")
        elif "segments" in res and res["segments"] is not None:
            extra = "%d segments, %d calls" % (len(res["segments"]), len(res.get("calls", [])))
        elif "detected" in res:
            extra = "detected %s (p=%.3f)" % (res["detected"], res["top5"][0]["prob"])
        res["seconds"] = round(dt, 3)
    log("    %-22s ok  %.2fs  %s" % (name, dt, extra))
    return res


def features(fe, samples, **kw):
    out = fe(samples, sampling_rate=SR, return_tensors="pt", **kw)
    return out


def feature_summary(f):
    a = f[0].double()
    return {"shape": list(f[0].shape), "sum": float(a.sum()), "mean": float(a.mean()),
            "std": float(a.std(unbiased=False)), "max": float(a.max()), "min": float(a.min()),
            "frame0_first8": [float(x) for x in a[:8, 0].tolist()]}


# ----------------------------------------------------------------------------------------------
# main
# ----------------------------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab-dir", required=True, help="directory with GPT-2 vocab.json + merges.txt (gguf_vocab.py)")
    ap.add_argument("--audio-dir", required=True, help="directory of 16-bit PCM mono 16 kHz *.wav clips")
    ap.add_argument("--out", required=True, help="output directory (becomes tests/fixtures/whisper)")
    ap.add_argument("--tar", metavar="DIR", help="also pack the output into DIR/whisper_<part>.tar.gz "
                    "(one per config + whisper_common; each < 16 MiB; extract all in tests/fixtures)")
    ap.add_argument("--configs", default=",".join(c["name"] for c in CONFIGS), help="comma-separated subset")
    ap.add_argument("--threads", type=int, default=16)
    args = ap.parse_args()

    t_start = time.time()
    torch.set_num_threads(args.threads)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.set_grad_enabled(False)

    import tokenizers
    import transformers
    log("python %s  torch %s  transformers %s  tokenizers %s  numpy %s  threads %d" % (
        platform.python_version(), torch.__version__, transformers.__version__, tokenizers.__version__,
        np.__version__, torch.get_num_threads()))

    out_dir = os.path.abspath(args.out)
    if os.path.exists(out_dir) and os.listdir(out_dir):
        raise SystemExit("output directory %s is not empty" % out_dir)
    os.makedirs(out_dir, exist_ok=True)

    gpt2_vocab, merges = load_gpt2_vocab(args.vocab_dir)
    log("GPT-2 vocab: %d tokens, %d merges" % (len(gpt2_vocab), len(merges)))

    # ---- audio
    if not os.path.isdir(args.audio_dir):
        raise SystemExit("--audio-dir %s does not exist" % args.audio_dir)
    clips = []
    for fn in sorted(os.listdir(args.audio_dir)):
        if fn.lower().endswith(".wav"):
            pcm = read_wav(os.path.join(args.audio_dir, fn))
            clips.append({"name": os.path.splitext(fn)[0], "source": "audio-dir", "wav": fn, "pcm": pcm})
    if not clips:
        log("WARNING: no *.wav in %s; only the synthetic clip will be used" % args.audio_dir)
    syn = synthetic_pcm()
    write_wav(os.path.join(out_dir, "synthetic_chirp.wav"), syn)
    clips.append({"name": "synthetic_chirp", "source": "out-dir (generated)", "wav": "synthetic_chirp.wav",
                  "pcm": syn})
    for c in clips:
        c["samples"] = pcm_to_float(c["pcm"])
        c["info"] = {"wav": c["wav"], "source": c["source"], "num_samples": int(len(c["pcm"])),
                     "seconds": len(c["pcm"]) / SR, "pcm_sha256": sha256_bytes(c["pcm"].astype("<i2").tobytes())}
        if len(c["pcm"]) > 30 * SR:
            log("WARNING: %s is longer than 30 s; short-form cases use its first 30 s (feature truncation)" % c["wav"])
        log("clip %-24s %.2fs" % (c["name"], c["info"]["seconds"]))

    # long-form signal: all clips joined by 1 s of silence, repeated until > 32 s
    sil = np.zeros(SR, dtype="<i2")
    parts, total = [], 0
    while total <= 32 * SR:
        for c in clips:
            parts += [c["pcm"], sil]
            total += len(c["pcm"]) + len(sil)
    long_pcm = np.concatenate(parts).astype("<i2")
    write_wav(os.path.join(out_dir, "longform.wav"), long_pcm)
    long_info = {"wav": "longform.wav", "num_samples": int(len(long_pcm)), "seconds": len(long_pcm) / SR,
                 "pcm_sha256": sha256_bytes(long_pcm.tobytes()),
                 "recipe": "clips in order %s, each followed by 1 s of zeros, repeated until > 32 s" %
                           [c["wav"] for c in clips]}
    log("longform.wav %.2fs" % long_info["seconds"])

    manifest = {
        "generator": "tools/reference/whisper_reference.py",
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
                     "numpy": np.__version__},
        "device": "cpu", "dtype": "float32", "threads": torch.get_num_threads(),
        "init": {"linear_conv_std": INIT_STD, "embed_tokens_std": EMBED_STD, "bias_std": BIAS_STD,
                 "layer_norm": "weight 1+N(0,%g), bias N(0,%g)" % (LN_STD, LN_STD),
                 "encoder_positions": "sinusoids (as OpenAI)", "decoder_positions_std": INIT_STD,
                 "rng": "torch.Generator().manual_seed(config seed), parameters in named_parameters() order"},
        "clips": {c["name"]: c["info"] for c in clips},
        "longform": long_info,
        "configs": {},
    }
    failures = []
    wanted = [s for s in args.configs.split(",") if s]
    for cfg in CONFIGS:
        if cfg["name"] not in wanted:
            continue
        t_cfg = time.time()
        L = token_layout(cfg["kind"])
        log("\n=== %s (%s layout, vocab %d) ===" % (cfg["name"], cfg["kind"], L["vocab_size"]))
        cdir = os.path.join(out_dir, cfg["name"])
        mdir = os.path.join(cdir, "model")
        os.makedirs(mdir, exist_ok=True)
        tok, spot, enc_probe = build_tokenizer(L, gpt2_vocab, merges, mdir)
        model, gc, fe, gdict, minfo = build_model(cfg, L, mdir)
        R = Runner(model, gc, fe, tok, L, cfg)

        ref = {
            "config": cfg["name"], "seed": cfg["seed"], "model_dir": "model",
            "architecture": {k: cfg[k] for k in ("d_model", "encoder_layers", "decoder_layers", "heads", "ffn", "n_mels")},
            "layout": {k: L[k] for k in ("kind", "vocab_size", "eot", "sot", "translate", "transcribe", "startoflm",
                                         "startofprev", "nospeech", "notimestamps", "timestamp_begin", "timestamp_end")},
            "languages": len(L["lang_to_id"]),
            "tokenizer_spot_checks": spot,
            "tokenizer_probe": {"text": " hello world", "ids": enc_probe},
            "generation_config": gdict,
            "clips": {},
        }
        for c in clips:
            log("  -- clip %s" % c["name"])
            cres = {"wav": c["wav"], "num_samples": c["info"]["num_samples"]}
            fo = features(fe, c["samples"])
            feats = fo["input_features"].float()
            if tuple(feats.shape) != (1, cfg["n_mels"], 3000):
                raise SystemExit("unexpected feature shape %s" % (tuple(feats.shape),))
            cres["features"] = feature_summary(feats)
            enc = model.model.encoder(feats).last_hidden_state[0]
            cres["encoder_output"] = write_f32(os.path.join(cdir, "%s.encoder.f32" % c["name"]), enc.numpy())
            cres["encoder_output"]["stats"] = {"mean": float(enc.double().mean()), "std": float(enc.double().std())}
            cres["first_step"] = run_case("first_step", lambda: R.first_step(feats), failures, True)
            cres["greedy_fixed"] = run_case("greedy_fixed", lambda: R.greedy_or_beam(feats, 1, 24, 24), failures, True)
            cres["greedy_stop"] = run_case("greedy_stop", lambda: R.greedy_or_beam(feats, 1, 40, None), failures, True)
            cres["beam"] = run_case("beam", lambda: R.greedy_or_beam(feats, 4, 16, 16), failures, True)
            cres["beam_stop"] = run_case("beam_stop", lambda: R.greedy_or_beam(feats, 4, 16, None), failures, False)
            cres["timestamps"] = run_case("timestamps", lambda: R.timestamps(feats, 24), failures, True)
            if R.multi:
                cres["language"] = run_case("language", lambda: R.language(feats), failures, False)
            cres["word_timestamps"] = run_case("word_timestamps", lambda: R.word_timestamps(feats), failures, False)
            nf = min(3000, int(math.ceil(len(c["samples"]) / HOP)))
            cres["word_timestamps_cropped"] = run_case(
                "word_timestamps_cropped", lambda: R.word_timestamps(feats, num_frames=nf), failures, False)
            ref["clips"][c["name"]] = cres

        if cfg["longform"]:
            log("  -- longform")

            def do_long():
                fo = features(fe, pcm_to_float(long_pcm), truncation=False, padding="longest",
                              return_attention_mask=True)
                lf = fo["input_features"].float()
                am = fo.get("attention_mask") if hasattr(fo, "get") else None
                log("    longform features %s" % (tuple(lf.shape),))
                if lf.shape[-1] <= 3000:
                    raise RuntimeError("long-form features are only %d frames" % lf.shape[-1])
                try:
                    r = R.timestamps(lf, 40, attention_mask=am, longform=True)
                    r["attention_mask_passed"] = am is not None
                except (TypeError, ValueError, RuntimeError) as e:
                    log("    note: long-form generate with attention_mask failed (%r); retrying without" % (e,))
                    r = R.timestamps(lf, 40, attention_mask=None, longform=True)
                    r["attention_mask_passed"] = False
                r["wav"] = "longform.wav"
                r["features"] = feature_summary(lf)
                return r

            ref["longform"] = run_case("longform", do_long, failures, False)

        with open(os.path.join(cdir, "reference.json"), "w") as f:
            json.dump(ref, f, indent=1, allow_nan=False)
        manifest["configs"][cfg["name"]] = dict(cfg, vocab_size=L["vocab_size"], model=minfo,
                                                seconds=round(time.time() - t_cfg, 2))
        log("  %s done in %.1fs" % (cfg["name"], time.time() - t_cfg))
        del model

    manifest["seconds_total"] = round(time.time() - t_start, 2)
    manifest["failures"] = [{"case": n, "error": e, "core": c} for n, e, c in failures]
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, allow_nan=False)

    # ---- sizes
    total = 0
    for root, _, files in os.walk(out_dir):
        for fn in files:
            p = os.path.join(root, fn)
            sz = os.path.getsize(p)
            total += sz
            if sz >= 10 * MB:
                log("WARNING: %s is %.2f MB (>= 10 MB)" % (os.path.relpath(p, out_dir), sz / MB))
    log("\nfixtures: %.2f MB in %s" % (total / MB, out_dir))
    if total > 30 * MB:
        log("WARNING: fixtures exceed 30 MB")

    if args.tar:
        os.makedirs(args.tar, exist_ok=True)
        parts = {"common": [n for n in sorted(os.listdir(out_dir)) if os.path.isfile(os.path.join(out_dir, n))]}
        for n in sorted(os.listdir(out_dir)):
            if os.path.isdir(os.path.join(out_dir, n)):
                parts[n] = [n]
        for part, names in parts.items():
            tp = os.path.join(args.tar, "whisper_%s.tar.gz" % part)
            with tarfile.open(tp, "w:gz") as tf:
                for n in names:
                    tf.add(os.path.join(out_dir, n), arcname=os.path.join("whisper", n))
            sz = os.path.getsize(tp)
            log("tar %s: %.2f MB" % (tp, sz / MB))
            if sz >= 16 * MB:
                log("ERROR: %s is >= 16 MiB and will not come back from the device" % tp)
                failures.append(("tar " + part, "too large", True))

    log("total time %.1fs" % (time.time() - t_start))
    if failures:
        log("\nFAILURES:")
        for n, e, c in failures:
            log("  %s%s: %s" % ("[core] " if c else "", n, e))
        if any(c for _, _, c in failures):
            sys.exit(2)


if __name__ == "__main__":
    main()
