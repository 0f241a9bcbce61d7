#!/usr/bin/env python3
"""Writes the model card (models/NAME/README.md) from what the recipe produced: the training
record (training.json), the transformers evaluation (eval.json), parlance's comparisons on the
same clips (compare.py --json, one per set), the synthesizer versions (.train/VERSIONS) and the
recipe's commit. Every figure in the card comes from those files; nothing is typed in by hand.

  python3 tools/train/card.py --name parlance-synth-en --training training-full.json \
      --eval eval-full.json --compare seen=cmp-seen.json --compare heldout=cmp-heldout.json \
      --versions .train/VERSIONS --commit 0bd3fe9 --out models/parlance-synth-en/README.md
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import beams_in, model_beams  # noqa: E402  (how compare.py reads decoding options)
from evaluate import normalize  # noqa: E402

KEY_PACKAGES = ("espeak-ng_", "flite_", "festival_", "festvox-us-slt-hts_", "festvox-kdlpc16k_", "fortunes_",
                "wordnet-base_")


def pct(x):
    return "%.1f %%" % (100 * x)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--name", required=True)
    ap.add_argument("--training", required=True)
    ap.add_argument("--eval", required=True)
    ap.add_argument("--compare", action="append", default=[], help="SET=compare.py --json output")
    ap.add_argument("--compare-f32", action="append", default=[],
                    help="SET=compare.py --quantize f32 --json output (parity with the weights as transformers ran them)")
    ap.add_argument("--continued-from", action="append", default=[],
                    help="training.json of an earlier stage the model was continued from (device_call.sh "
                         "continue / start-continue); once per stage, the run from scratch first")
    ap.add_argument("--versions", required=True)
    ap.add_argument("--commit", required=True, help="commit of tools/train that produced the model")
    ap.add_argument("--splice", type=float, default=0.5,
                    help="the run's synth.py --splice (device_run.sh SPLICE; 0.5 unless set)")
    ap.add_argument("--sample-max-wer", type=float, default=0.0, help="make_samples.py --max-wer of the samples")
    ap.add_argument("--long", action="append", default=[],
                    help="compare.py --join --json output (long audio, parlance only); once per set and decoding")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    tr = json.load(open(args.training))
    earlier = [json.load(open(p)) for p in args.continued_from]
    base = earlier[0] if earlier else None
    ev_report = json.load(open(args.eval))
    ev = ev_report["sets"]
    cmp = {}
    for spec in args.compare:
        name, path = spec.split("=", 1)
        cmp[name] = json.load(open(path))
    cmp_f32 = {}
    for spec in args.compare_f32:
        name, path = spec.split("=", 1)
        cmp_f32[name] = json.load(open(path))
    versions = [l.strip() for l in open(args.versions) if l.strip().startswith(KEY_PACKAGES)]
    a = tr["args"]

    rows = []
    labels = {"seen": "held-out sentences, seen voices", "heldout": "held-out sentences, held-out voice (flite rms)",
              "real": "real recordings (LibriVox clips, JFK)"}
    for name in ("seen", "heldout", "real"):
        if name not in ev:
            continue
        e = ev[name]
        c = cmp.get(name)
        ours = ("%s on the first %d clips (transformers on them: %s); %d of %d transcripts identical" % (
            pct(c["wer_parlance"]), c["clips"], pct(c["wer_transformers"]), c["identical"], c["clips"])
            if c else "—")
        if name in cmp_f32:
            ours += "; with `--quantize f32` %d of %d" % (
                cmp_f32[name]["identical"], cmp_f32[name]["clips"])
        rows.append("| %s | %d | %d | %s | %s |" % (labels[name], e["clips"], e["words"], pct(e["wer"]), ours))
    ns = ev.get("nospeech", {})
    picked = ""
    first = base or tr  # the run from scratch (two candidates, one kept)
    if first.get("candidates"):
        lines = []
        for c in first["candidates"]:
            pr = c.get("final_probe") or {}
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                c["name"] + (" (kept)" if c["name"] == first.get("chosen") else ""), c["lr"], c.get("p_corrupt"),
                c.get("ctc_weight"), c["steps"], pr.get("loss", "—"), pr.get("token_acc", "—"), pr.get("ctc_cer", "—")))
        picked = ("\n\nTwo trainings shared the GPU; `pick.py` kept the one with the lower loss on held-out "
                  "sentences (the probe: 32 windows never trained on, no augmentation):\n\n"
                  "| run | learning rate | input corruption | CTC weight | steps | probe loss | probe token accuracy | probe CTC CER |\n"
                  "|---|---|---|---|---|---|---|---|\n" + "\n".join(lines))

    # The recipe's targets (issue 5): 10 % on seen voices, 20 % on the held-out voice.
    results = [(name, ev[k]["wer"] <= lim) for k, name, lim in (("seen", "seen voices", 0.10),
                                                                  ("heldout", "held-out voice", 0.20)) if k in ev]
    missed = [name for name, ok in results if not ok]
    runs = "(`tools/train/README.md`, section Runs: what each run changed and what is next)"
    if results and not missed:
        state = "met"
    elif len(missed) == len(results):
        state = "**not met yet** " + runs
    else:
        state = "met for the %s, **not yet for the %s** %s" % (
            ", ".join(n for n, ok in results if ok), ", ".join(missed), runs)
    targets = "The recipe's targets, at most 10 %% (seen voices) and 20 %% (held-out voice), are %s." % state
    # Which no-speech clips gave text with transformers, and what.
    ns_text = ", ".join("%s: \"%s\"" % (r["id"], r["hyp"].strip()) for r in ns.get("rows", []) if normalize(r["hyp"]))
    ns_parlance = " — %s" % ns_text if ns_text else ""
    if "nospeech" in cmp:
        c = cmp["nospeech"]
        ns_parlance += ("; %d of %d with `parlance transcribe` as a user runs it (timestamps, temperature fallback "
                        "and its no-speech gate on), `compare.py --set nospeech`" % (c["clips_with_text"], c["clips"]))
        if "identical" in c:
            ns_parlance += (". Decoded as the evaluation decodes (no timestamps, temperature 0, no gate: "
                            "`--no-speech-threshold 1`), parlance gives transformers' text on %d of %d "
                            "(`compare.py --set nospeech --report eval.json`)" % (c["identical"], c["clips"]))
    continued = ""
    if earlier:
        def final_probe(record):
            probes = [p for p in record.get("probes", []) if p.get("final")]
            return probes[-1]["loss"] if probes else "—"

        stages = []
        for i, record in enumerate(earlier + [tr]):
            ra = record["args"]
            stages.append("| %d%s | %d | %d | %.1f | %s | %.1f | %s |" % (
                i + 1, " (from scratch)" if i == 0 else "", record["steps"], ra["batch"], record["seconds"] / 60,
                ra["lr"], record["hours"], final_probe(record)))
        continued = ("\n\nThe kept model was then trained on, each stage on freshly synthesized data from where the "
                     "previous one ended (`device_call.sh continue` / `start-continue`); the figures above are the "
                     "last stage's:\n\n"
                     "| stage | steps | batch | minutes | peak learning rate | hours of speech | final probe loss |\n"
                     "|---|---|---|---|---|---|---|\n" + "\n".join(stages))
    # The model's default beams (its generation_config.json, beside the card).
    default_beams = model_beams(os.path.dirname(os.path.abspath(args.out)))

    def decoding_label(lj):
        # compare.py records the beams; older files only name them in the options, if at all.
        beams = lj.get("num_beams") or beams_in(lj["decoding"]) or 1
        return "%s (%s)" % ("`" + lj["decoding"] + "`" if lj["decoding"] else "defaults",
                            "greedy" if beams == 1 else "%d beams" % beams)

    long_rows = []
    for path in args.long:
        lj = json.load(open(path))
        audio = ("%d clips one by one (%.0f s each)" % (lj["files"], lj["seconds"]) if lj["join"] == 1 else
                 "%d files of %d sentences (%.0f s each)" % (lj["files"], lj["join"], lj["seconds"]))
        long_rows.append("| %s | %s | %s | %s |" % (
            labels.get(lj["set"], lj["set"]).replace("held-out sentences, ", ""), audio, decoding_label(lj),
            pct(lj["wer_parlance"])))
    if default_beams > 1:
        advice = ("Beam search is this model's default (`num_beams` %d in `generation_config.json`, which "
                  "parlance and transformers' `generate()` both read); `--beam-size 1` decodes greedily." % default_beams)
    else:
        advice = "For long recordings with this model, use `--beam-size 5`."
    long_table = ""
    if long_rows:
        long_table = ("\n\nWord error rate of `parlance transcribe` as a user runs it (`compare.py --join N`: the "
                      "held-out clips one by one, or joined ten at a time into long files transcribed with "
                      "timestamps in 30-second windows; parlance only):\n\n"
                      "| voices | audio | decoding | WER |\n|---|---|---|---|\n" + "\n".join(long_rows) +
                      "\n\nWhere greedy decoding fails on long files it writes a fragment with a far end timestamp "
                      "(one run: \"App\" from 4.2 to 24.3 s), then text without timestamps to the window's end; "
                      "beam search keeps the structure. " + advice)
    eval_beams = ev_report.get("num_beams", 1)
    eval_decoding = "greedy decoding" if eval_beams == 1 else "beam search (%d beams)" % eval_beams
    vtlp = (" vocal tract length perturbation (warp factors 1 ± %g)," % a["vtlp"]) if a.get("vtlp") else ""
    speed = (" speed perturbation (rates 1 ± %g)," % a["speed"]) if a.get("speed") else ""
    text = f"""# {args.name}

A small English speech-recognition model in the Whisper architecture, **trained by parlance's own
recipe (`tools/train/`, commit `{args.commit}`) on synthetic speech only**. It exists so that a
fresh parlance install transcribes something out of the box and so that the live-transcription,
VAD and speculation work has a model whose output means something.

**What it is not for:** real-world speech. It has heard only Debian's speech synthesizers
(espeak-ng, flite, festival); on human recordings expect it to fail (figures below).

## Model

Whisper (HF layout: `config.json`, `model.safetensors` in float16, `generation_config.json`,
`tokenizer.json`, `preprocessor_config.json`), English only: d_model {a["d_model"]},
{a["encoder_layers"]} encoder + {a["decoder_layers"]} decoder layers, {a["heads"]} heads, 80 mel bins,
{tr["parameters"] / 1e6:.2f} M parameters. Its own byte-level BPE of {a["text_vocab"]} text tokens,
then Whisper's special tokens and 1,501 timestamps; trained with timestamps, so segment and word
timestamps work. Loads in parlance and in transformers alike.

## Training

{tr["steps"]} steps of {a["batch"]} 30-second windows in {tr["seconds"] / 60:.1f} minutes on one
{tr["device"]} (torch {tr["torch"]}, transformers {tr["transformers"]}), seed {a["seed"]}, from
{tr["utterances"]:,} synthesized utterances ({tr["hours"]} h) of sentences from Debian's `fortunes`
and WordNet glosses ({pct(args.splice)} of them spliced from spans of several sentences, so that
the decoder cannot complete them from memory); held-out sentences (split by hash in `corpus.py`) and one voice (flite `rms`) were never
used in training. Augmentation: reverberation (p {a.get("p_reverb")}), telephone band and mu-law (p {a.get("p_phone")}),
coloured noise (p {a.get("p_noise")}) at {a.get("snr_min")}–{a.get("snr_max")} dB SNR, level
{a.get("gain_min")}…{a.get("gain_max")} dB,{vtlp}{speed} SpecAugment; an auxiliary character CTC loss on the
encoder (weight {a.get("ctc_weight")}, dropped at export); {pct(a.get("p_corrupt") or 0)} of the decoder's
teacher-forced input tokens replaced by random ones, label smoothing {a.get("label_smoothing", 0)}.
Final training loss {tr["final_loss"]} (label-smoothed).{picked}{continued}

Synthesizers and text (exact Debian versions):
{", ".join("`" + v + "`" for v in versions)}.

Reproduce with the recipe at the commits above (each stage's `tools/train` checked out):
`bash tools/train/prepare.sh`, then the device calls in `tools/train/README.md` (the first stage
`start` and `collect`, later ones `continue`, or `start-continue` and two `collect`).

## Accuracy

Word error rate, {eval_decoding}, no timestamps (`evaluate.py` with transformers on the GPU
machine; `compare.py` with `parlance transcribe` here, on the same clips, with the same decoding):

| set | clips | words | WER (transformers) | WER (parlance) |
|---|---|---|---|---|
{chr(10).join(rows)}

{targets}

No speech (silence, and white/pink/brown noise at -40 and -20 dBFS): {ns.get("clips_with_text", "—")} of
{ns.get("clips", "—")} clips produced text with transformers, {eval_decoding}, no timestamps{ns_parlance}.

Commands: `python3 tools/train/evaluate.py --model MODEL --set seen=... --set heldout=... --real
.train/real --out eval.json --save-clips clips` (device), `python3 tools/train/compare.py
--parlance build/parlance --model models/{args.name} --clips clips_seen.npz --report eval.json
--set seen --json cmp-seen.json` (here; `--quantize f32` runs parlance with float32 weights, as
transformers ran them; `--set nospeech [--report eval.json]` the no-speech clips).

## Samples

`samples/` holds held-out sentences (never in training) with their reference text:
`heldout_voice` (the held-out voice), `seen_voice`, and `long` (ten sentences in a row, past one
30-second window). They were picked by `tools/train/make_samples.py` among the evaluation clips
that transformers transcribed best (a word error rate of at most {args.sample_max_wer:g} each):
they show the pipeline working end to end; the table above is how well the model does on
typical held-out sentences.

## Long audio

`generation_config.json` sets `condition_on_prev_tokens` to false: parlance, like transformers,
decodes each 30-second window on its own; `--condition-on-previous-text` prompts each window with
the text before it. Models trained on prompts of at most 96 tokens lost words that way (parlance,
like OpenAI's decoder, passes up to 223); the recipe now trains prompts that long (BENCHMARKS.md,
the training runs, has what conditioning measured on each model).{long_table}
"""
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(text)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
