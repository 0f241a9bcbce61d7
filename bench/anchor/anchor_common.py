"""What the transformers anchors share: a 16 kHz mono 16-bit WAV read as float samples in [-1, 1),
and a random-init model of a config made on the GPU in bf16 with sdpa attention."""
import wave

import numpy as np
import torch


def read_wav(path):
    with wave.open(path, "rb") as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1 and w.getframerate() == 16000, path
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768.0


def random_model(model_class, cfg):
    """Random weights (seed 0) made on the GPU in bf16: 2 B parameters initialised on the host take minutes."""
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cuda"):
            return model_class(cfg).eval()
    finally:
        torch.set_default_dtype(torch.float32)
