#!/usr/bin/env python3
"""Turns bench/run.sh's JSON lines into the markdown table of BENCHMARKS.md (medians of the reps).

Ratios are parlance / whisper.cpp, against the faster of whisper.cpp's two attention settings
(flash attention off / on; on is its default). The decode floor is the bytes of decoder weights
one batch-1 step reads divided by the measured streaming-read bandwidth at the same thread count.
"""
import json
import statistics
import sys


def med(x):
    return statistics.median(x) if isinstance(x, list) else x


def main(path):
    rows = [json.loads(l) for l in open(path) if l.strip()]
    bw = {r["threads"]: r["read_gbs"] for r in rows if r["tool"] == "bandwidth"}
    runs = {}
    for r in rows:
        if r["tool"] in ("bandwidth", "load"):
            continue
        name = r["model"].rsplit("/", 1)[-1].removesuffix(".bin")
        key = (name, r["threads"])
        tool = r["tool"] if r["tool"] == "parlance" else ("wcpp_fa" if r["flash_attn"] else "wcpp")
        runs.setdefault(key, {})[tool] = r

    print("| model | threads | load ms (ours / w.cpp best) | log-mel ms (ours / w.cpp best) | encode ms ours | "
          "w.cpp FA off / on | **encode ratio** | decode ms/tok ours | w.cpp FA off / on | "
          "**decode ratio** | floor ms/tok | **ours / floor** | peak RSS MiB (ours / w.cpp off / on) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (name, t), d in runs.items():
        p, w, wf = d.get("parlance"), d.get("wcpp"), d.get("wcpp_fa")
        if not p or not (w or wf):
            continue
        ws = [x for x in (w, wf) if x]  # a run cut short may lack one whisper.cpp setting

        def cell(x, key, fmt):
            return format(med(x[key]), fmt) if x else "—"

        enc, dec = med(p["encode_ms"]), med(p["decode_ms_per_token"])
        best_e = min(med(x["encode_ms"]) for x in ws)
        best_d = min(med(x["decode_ms_per_token"]) for x in ws)
        floor = p["decoder_step_weight_bytes"] / (bw.get(t, float("nan")) * 1e9) * 1e3
        load_w = min(x["load_ms"] for x in ws)
        mel_w = min(med(x["mel_ms"]) for x in ws)
        print(f"| {name} | {t} | {p['load_ms']:.0f} / {load_w:.0f} | "
              f"{med(p['mel_ms']):.0f} / {mel_w:.0f} | {enc:.0f} | "
              f"{cell(w, 'encode_ms', '.0f')} / {cell(wf, 'encode_ms', '.0f')} | **{enc / best_e:.2f}** | "
              f"{dec:.2f} | {cell(w, 'decode_ms_per_token', '.2f')} / {cell(wf, 'decode_ms_per_token', '.2f')} | "
              f"**{dec / best_d:.2f}** | {floor:.2f} | **{dec / floor:.2f}** | {p['peak_rss_mib']:.0f} / "
              f"{cell(w, 'peak_rss_mib', '.0f')} / {cell(wf, 'peak_rss_mib', '.0f')} |")
    print()
    for r in rows:
        if r["tool"] == "load":
            print(f"- {r['date']}: {r['model']}, {r['threads']} thread(s), load average before: {r['loadavg']}")
    for t, g in sorted(bw.items()):
        print(f"- streaming-read bandwidth, {t} thread(s): {g:.1f} GB/s")
    for (name, t), d in runs.items():
        p = d.get("parlance")
        if p and t == min(bw, default=t):
            print(f"- {name}: decoder weights read per step {p['decoder_step_weight_bytes'] / 1e6:.1f} MB, "
                  f"cross-attention K/V (ours) {p['cross_kv_bytes'] / 1e6:.1f} MB, all weights "
                  f"{p['weight_bytes'] / 1e6:.1f} MB")


if __name__ == "__main__":
    main(sys.argv[1])
