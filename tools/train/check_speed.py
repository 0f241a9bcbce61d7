#!/usr/bin/env python3
"""CPU check of speed perturbation (train.py --speed): `assemble` reads a window at its rate with
linear interpolation and `plan_window` writes the timestamps of what is heard. Needs torch and
numpy only (no transformers):

  /usr/bin/python3 tools/train/check_speed.py

Checks: at rate 1 the stored samples exactly (also when another window of the batch has another
rate); a 1 kHz tone played at 1.1 peaks at 1100 Hz; a ramp played at 0.9 is the ramp at
fractional positions; a short utterance played at 0.92 never reads the next utterance's samples
(the played length is (stored - 1) / rate + 1, not stored / rate); in 200 planned windows every
timestamp lies within 10 ms of where its utterance starts and ends in the window; --speed 0 draws
no rate.
"""
import os
import sys, types, random, argparse
import numpy as np, torch
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train
SR = 16000
# a store of two utterances: a 1 kHz tone (2 s) and a ramp (1 s)
tone = (np.sin(2*np.pi*1000*np.arange(2*SR)/SR)*16000).astype(np.int16)
ramp = (np.arange(SR) - SR//2).astype(np.int16)
audio = torch.tensor(np.concatenate([[0], tone, ramp]), dtype=torch.int16)
st = types.SimpleNamespace(audio=audio, offset=[1, 1+2*SR], length=[2*SR, SR], tokens=[[5, 6], [7]], chars=[[1], [2]], voice=['a','b'])
# window 0 at rate 1 (through the float path, because window 1 is not), window 1 at 1.1
plans = [(1.0, [(1, 2*SR, 1000), (1+2*SR, SR, 3*SR)]), (1.1, [(1, int(2*SR/1.1), 500)])]
x = train.assemble(st, plans, 'cpu')
exact = train.assemble(st, [plans[0]], 'cpu')[0]
w0 = x[0]
assert torch.equal(w0, exact), "rate 1 must give the stored samples"
assert torch.equal(w0[1000:1000+2*SR], torch.tensor(tone).float()/32768), "tone placed"
assert w0[:1000].abs().max() == 0 and w0[1000+2*SR:3*SR].abs().max() == 0, "silence around"
w1 = x[1]
n = int(2*SR/1.1)
assert w1[:500].abs().max() == 0 and w1[500+n:].abs().max() == 0, "only the chunk's samples"
# a short utterance at 0.92: the last played sample interpolates inside the utterance, not into the
# ramp after it (the store's next utterance)
short = types.SimpleNamespace(audio=torch.tensor([0] + [1000] * 12 + [-30000] * 5, dtype=torch.int16),
                              offset=[1], length=[12])
n_short = int((12 - 1) / 0.92) + 1
z = train.assemble(short, [(0.92, [(1, n_short, 0)])], 'cpu')[0].numpy() * 32768
assert np.allclose(z[:n_short], 1000, atol=1e-3), z[:n_short]
seg = w1[500:500+n].numpy()
f = np.fft.rfftfreq(len(seg), 1/SR)[np.argmax(np.abs(np.fft.rfft(seg)))]
print("tone at rate 1.1: %.1f Hz" % f)
assert abs(f - 1100) < 5
# the ramp at rate 0.9: linear interpolation of a ramp is the ramp at fractional positions
y = train.assemble(st, [(0.9, [(1+2*SR, int((SR - 1) / 0.9) + 1, 0)])], 'cpu')[0].numpy()*32768
k = np.arange(int((SR - 1) / 0.9) + 1)
want = (np.minimum(k*0.9, SR-1) - SR//2)
print("ramp max error %.4f" % np.abs(y[:len(k)] - want).max())
assert np.abs(y[:len(k)] - want).max() < 1e-2
# plan_window: timestamps follow the played lengths
args = argparse.Namespace(p_nospeech=0.0, p_timestamps=1.0, p_translate=0.0, p_prompt=0.0, max_prompt_tokens=223,
                          max_tokens=440, speed=0.1)
L = train.Layout(2048)
rng = random.Random(3)
for _ in range(200):
    (rate, chunks), inp, labels, speech, active, ctc = train.plan_window(rng, st, L, args, [[1]])
    assert 0.9 <= rate <= 1.1
    stamps = [t for t in inp if t >= L.ts0]
    for j, (src, length, dst) in enumerate(chunks):
        assert dst + length <= train.WIN
        stored = st.length[st.offset.index(src)]
        full = length == int((stored - 1) / rate) + 1
        assert (length - 1) * rate <= stored - 1 + 1e-9, "a chunk reads past its utterance"
        assert abs((stamps[2*j] - L.ts0) * 0.02 - dst / SR) <= 0.011
        if full:
            assert abs((stamps[2*j+1] - L.ts0) * 0.02 - (dst + length) / SR) <= 0.011
        else:
            assert dst + length == train.WIN  # the cut one runs to the window's end
    assert active == sum(c[1] for c in chunks)
args.speed = 0.0
(rate, _), *_ = train.plan_window(random.Random(3), st, L, args, [[1]])
assert rate == 1.0
print("speed perturbation checks passed")
