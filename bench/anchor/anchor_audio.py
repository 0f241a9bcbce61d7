"""What the transformers anchors share: a 16 kHz mono 16-bit WAV read as float samples in [-1, 1)."""
import wave

import numpy as np


def read_wav(path):
    with wave.open(path, "rb") as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1 and w.getframerate() == 16000, path
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768.0
