#!/usr/bin/env python3
"""Extract a GPT-2 style BPE vocabulary from a GGUF file (pure Python, no numpy).

    python3 tools/reference/gguf_vocab.py ggml-vocab-gpt-2.gguf --out DIR

writes DIR/vocab.json ({token: id}) and DIR/merges.txt ("#version: 0.2" header,
one "left right" merge per line), the two files a GPT-2 byte-level BPE needs.
Only the GGUF header and the key/value section are read (tokenizer.ggml.tokens,
tokenizer.ggml.merges); tensor data is never touched.

GGUF layout (little-endian): magic "GGUF", u32 version (2 or 3), u64 n_tensors,
u64 n_kv, then n_kv x (key: u64 len + bytes, u32 value type, value).
Arrays are u32 element type + u64 count + elements; strings are u64 len + bytes.
"""

import argparse
import json
import os
import struct
import sys

# GGUF value types
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY, \
    T_UINT64, T_INT64, T_FLOAT64 = range(13)

_SCALAR = {
    T_UINT8: "<B", T_INT8: "<b", T_UINT16: "<H", T_INT16: "<h", T_UINT32: "<I", T_INT32: "<i",
    T_FLOAT32: "<f", T_BOOL: "<?", T_UINT64: "<Q", T_INT64: "<q", T_FLOAT64: "<d",
}


class Reader:
    def __init__(self, data):
        self.data = data
        self.pos = 0

    def take(self, n):
        if self.pos + n > len(self.data):
            raise ValueError("truncated GGUF file at offset %d (need %d bytes)" % (self.pos, n))
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def unpack(self, fmt):
        size = struct.calcsize(fmt)
        return struct.unpack(fmt, self.take(size))[0]

    def string(self):
        n = self.unpack("<Q")
        return self.take(n).decode("utf-8", errors="surrogateescape")

    def value(self, vtype, keep=True):
        if vtype in _SCALAR:
            return self.unpack(_SCALAR[vtype])
        if vtype == T_STRING:
            return self.string()
        if vtype == T_ARRAY:
            etype = self.unpack("<I")
            count = self.unpack("<Q")
            if not keep and etype in _SCALAR:
                self.pos += struct.calcsize(_SCALAR[etype]) * count  # skip quickly
                return None
            out = [self.value(etype, keep) for _ in range(count)]
            return out if keep else None
        raise ValueError("unknown GGUF value type %d at offset %d" % (vtype, self.pos))


def read_gguf_kv(path, wanted=None):
    """Return {key: value} for the KV section (only keys in `wanted` if given)."""
    with open(path, "rb") as f:
        data = f.read()
    r = Reader(data)
    magic = r.take(4)
    if magic != b"GGUF":
        raise ValueError("%s: not a GGUF file (magic %r)" % (path, magic))
    version = r.unpack("<I")
    if version not in (2, 3):
        raise ValueError("%s: unsupported GGUF version %d" % (path, version))
    n_tensors = r.unpack("<Q")
    n_kv = r.unpack("<Q")
    kv = {"__version__": version, "__n_tensors__": n_tensors}
    for _ in range(n_kv):
        key = r.string()
        vtype = r.unpack("<I")
        keep = wanted is None or key in wanted
        val = r.value(vtype, keep)
        if keep:
            kv[key] = val
    return kv


def extract(path):
    kv = read_gguf_kv(path, wanted={"tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.ggml.model"})
    tokens = kv.get("tokenizer.ggml.tokens")
    merges = kv.get("tokenizer.ggml.merges")
    if not tokens:
        raise ValueError("%s has no tokenizer.ggml.tokens" % path)
    if not merges:
        raise ValueError("%s has no tokenizer.ggml.merges" % path)
    vocab = {}
    for i, t in enumerate(tokens):
        if t in vocab:
            raise ValueError("duplicate token %r at ids %d and %d" % (t, vocab[t], i))
        vocab[t] = i
    for m in merges:
        parts = m.split(" ")
        if len(parts) != 2:
            raise ValueError("malformed merge %r" % m)
    return kv.get("tokenizer.ggml.model"), tokens, merges, vocab


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gguf")
    ap.add_argument("--out", required=True, help="output directory for vocab.json + merges.txt")
    ap.add_argument("--expect-gpt2", action="store_true", default=True,
                    help="check 50257 tokens with id 50256 = <|endoftext|> (default on)")
    ap.add_argument("--no-expect-gpt2", dest="expect_gpt2", action="store_false")
    args = ap.parse_args()

    model, tokens, merges, vocab = extract(args.gguf)
    print("gguf: model=%s tokens=%d merges=%d" % (model, len(tokens), len(merges)))
    if args.expect_gpt2:
        if len(tokens) != 50257:
            sys.exit("expected 50257 GPT-2 tokens, got %d" % len(tokens))
        if tokens[50256] != "<|endoftext|>":
            sys.exit("expected id 50256 = <|endoftext|>, got %r" % tokens[50256])
        if tokens[220] != "\u0120":
            sys.exit("expected id 220 = 'Ġ' (byte-level space), got %r" % tokens[220])

    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(args.out, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for m in merges:
            f.write(m + "\n")
    print("wrote %s/vocab.json (%d) and %s/merges.txt (%d)" % (args.out, len(vocab), args.out, len(merges)))


if __name__ == "__main__":
    main()
