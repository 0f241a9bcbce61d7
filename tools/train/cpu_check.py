#!/usr/bin/env python3
"""CPU check of the training data path, without transformers or a GPU: a small character-CTC
encoder learns from synth.py's shards as train.py's Store loads them (offsets, samples, text).
If audio and text were misaligned anywhere, the held-out character error rate would stay at ~1.

  sudo apt-get install python3-torch python3-numpy
  python3 tools/train/synth.py --synth-root SYNTH --sentences corpus/train.txt --count 3000 \
      --out /tmp/syntest --jobs 2 --shard-size 100
  /usr/bin/python3 tools/train/cpu_check.py /tmp/syntest 8      # data folder, minutes

Its "held-out" set is the last 64 utterances, never trained on (their sentences are random draws
from train.txt, so a few may also be spoken in training). Seen on 2 cores (2026-11-29): CER 0.95
(step 100) -> 0.62 (step 700, 7 minutes).
"""
import os
import sys, time, random, types
import numpy as np, torch
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train
torch.set_num_threads(2)
class Tok:
    def encode_batch(self, texts, add_special_tokens=False):
        return [types.SimpleNamespace(ids=[0]) for _ in texts]
st = train.Store(sys.argv[1], Tok(), 'cpu'); st.refresh()
print('utterances', len(st.length), 'hours %.2f' % st.hours())
def slaney_mel(sr=16000, n_fft=400, n_mels=80):
    def hz2mel(f):
        f = np.asarray(f, float); m = 3 * f / 200.0
        return np.where(f >= 1000, 15 + np.log(np.maximum(f, 1e-9) / 1000) / (np.log(6.4) / 27), m)
    def mel2hz(m):
        m = np.asarray(m, float); f = 200.0 * m / 3
        return np.where(m >= 15, 1000 * np.exp(np.log(6.4) / 27 * (m - 15)), f)
    fft = np.linspace(0, sr / 2, n_fft // 2 + 1)
    pts = mel2hz(np.linspace(hz2mel(0), hz2mel(8000), n_mels + 2))
    fb = np.zeros((n_mels, len(fft)))
    for i in range(n_mels):
        l, c, r = pts[i], pts[i + 1], pts[i + 2]
        fb[i] = np.maximum(0, np.minimum((fft - l) / (c - l), (r - fft) / (r - c))) * 2 / (r - l)
    return torch.tensor(fb, dtype=torch.float32)
FB = slaney_mel(); WIN = torch.hann_window(400)
def logmel(x):
    s = torch.stft(x, 400, 160, window=WIN, return_complex=True)[..., :-1].abs() ** 2
    m = torch.clamp(FB @ s, min=1e-10).log10()
    m = torch.maximum(m, m.amax(dim=(1, 2), keepdim=True) - 8.0)
    return (m + 4) / 4
SEC = 6
class Enc(torch.nn.Module):
    def __init__(s, d=192, L=3):
        super().__init__()
        s.c1 = torch.nn.Conv1d(80, d, 3, padding=1); s.c2 = torch.nn.Conv1d(d, d, 3, stride=2, padding=1)
        s.pos = torch.nn.Parameter(torch.randn(SEC * 50, d) * 0.02)
        s.tf = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(d, 4, 4 * d, 0.0, batch_first=True, norm_first=True), L)
        s.out = torch.nn.Linear(d, len(train.CTC_CHARS) + 1)
    def forward(s, f):
        x = torch.nn.functional.gelu(s.c1(f)); x = torch.nn.functional.gelu(s.c2(x)).transpose(1, 2)
        return s.out(s.tf(x + s.pos[: x.shape[1]]))
m = Enc(); opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
idx = [i for i, l in enumerate(st.length) if l < (SEC - 0.5) * 16000]
rng = random.Random(1)
heldout = idx[-64:]; idx = idx[:-64]
def batch(ids):
    a = torch.zeros(len(ids), SEC * 16000)
    for b, i in enumerate(ids):
        o = st.offset[i]; n = st.length[i]; a[b, 1600:1600 + n] = st.audio[o:o + n].float() / 32768
    t = [st.chars[i] for i in ids]
    return logmel(a), torch.tensor([c for x in t for c in x]), torch.tensor([len(x) for x in t]), t
def cer(logits, refs):
    e = n = 0
    for p, r in zip(logits.argmax(-1).tolist(), refs):
        h = [c for k, c in enumerate(p) if c and (k == 0 or c != p[k - 1])]
        e += train.edit_distance(r, h); n += len(r)
    return e / n
hf, _, _, hr = batch(heldout)
t0 = time.time(); step = 0
while time.time() - t0 < float(sys.argv[2]) * 60:
    f, tg, tl, _ = batch(rng.sample(idx, 16))
    lp = m(f).log_softmax(-1).transpose(0, 1)
    loss = torch.nn.functional.ctc_loss(lp, tg, torch.full((16,), lp.shape[0]), tl, blank=0, zero_infinity=True)
    opt.zero_grad(); loss.backward(); torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0); opt.step(); step += 1
    if step % 100 == 0:
        with torch.no_grad():
            m.eval(); c = cer(m(hf), hr); m.train()
        print('step %d  %.0f s  loss %.3f  held-out CER %.3f' % (step, time.time() - t0, loss.item(), c), flush=True)
