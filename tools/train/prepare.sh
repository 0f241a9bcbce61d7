#!/usr/bin/env bash
# Prepares what the device run carries (the GPU machine has no network and no synthesizers):
#   .train/synth.tar.xz   espeak-ng, flite and festival (with their libraries) unpacked from the
#                         bookworm .debs and pruned to English; unpack anywhere, no root needed
#                         (festival reads /usr/share/festival: train_device.sh links it there)
#   .train/corpus.tar.xz  train/held-out sentences from fortunes + WordNet (corpus.py)
#   .train/VERSIONS       exact package versions (cited by the model card)
#   .train/real/          real recordings with reference transcripts (evaluate.py --real)
# Runs here, on a machine with apt; takes about a minute. The working tree plus .train must stay
# under the device's 64 MiB transfer limit, which is why voices are pruned (see README.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tools/train/fetch_debs.sh
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/synth" "$stage/text" .train
for f in .debs/*.deb; do
    case "$f" in
        *wordnet*|*fortunes*) dpkg -x "$f" "$stage/text" ;;
        *) dpkg -x "$f" "$stage/synth" ;;
    esac
done
python3 tools/train/corpus.py --root "$stage/text" --out "$stage/corpus"
tar -C "$stage" -cJf .train/corpus.tar.xz corpus

# English only, no documentation. festival speaks with its HTS voice (festvox-us-slt-hts) and
# one diphone voice, ked (festvox-kdlpc16k, ~4 MB packed): a speaker no other engine has. Its kal
# diphone voice would add nothing (flite speaks kal).
s="$stage/synth"
rm -rf "$s"/usr/share/{doc,man,X11,lintian,locale,bug,info,alsa} "$s"/etc/X11
ed="$s/usr/lib/x86_64-linux-gnu/espeak-ng-data"
find "$ed" -maxdepth 1 -name '*_dict' ! -name 'en_dict' -delete
rm -rf "$ed/mbrola_ph"
find "$ed/lang" -mindepth 1 -maxdepth 1 ! -name gmw -exec rm -rf {} +
find "$ed/lang/gmw" -mindepth 1 -maxdepth 1 ! -name 'en*' -exec rm -rf {} +
XZ_OPT=-9 tar -C "$s" -cJf .train/synth.tar.xz .
cp .debs/VERSIONS .train/VERSIONS
# Real recordings with references for the evaluation: LibriVox clips from pocketsphinx-testdata
# (installed by scripts/setup.sh) and the JFK sample.
mkdir -p .train/real
lv=/usr/share/pocketsphinx/test/data/librivox
while read -r line; do
    id=$(sed -E 's/.*\((.*)\)$/\1/' <<<"$line")
    cp "$lv/$id.wav" .train/real/
    sed -E 's/^<s> //; s/ <\/s>.*$//' <<<"$line" >".train/real/$id.txt"
done <"$lv/transcription"
cp tests/fixtures/audio/jfk.wav .train/real/
echo "And so my fellow Americans, ask not what your country can do for you, ask what you can do for your country." >.train/real/jfk.txt
du -sh .train/*
