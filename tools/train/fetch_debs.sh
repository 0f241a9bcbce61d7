#!/usr/bin/env bash
# Downloads the Debian (bookworm) packages the training recipe needs on the GPU machine, which
# has no network and no synthesizers: espeak-ng, flite, festival with its HTS voice, and the
# text sources (fortunes, WordNet). The .debs land in .debs/ (git-ignored); the device call
# carries that folder and unpacks it with `dpkg -x` (tools/train/unpack_debs.sh).
#
# Libraries every glibc system has (libc6, libstdc++6, libgcc-s1) and package-management tools
# are left out: unpacking an older libc into LD_LIBRARY_PATH would break the host's programs.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.debs
mkdir -p "$out"

roots=(espeak-ng flite festival festvox-us-slt-hts festvox-kdlpc16k
       fortunes wordnet-base)
skip='^(adduser|alsa-utils|cdebconf|debconf|dpkg|gcc-12-base|install-info|kmod|libc6|libgcc-s1|libstdc\+\+6|passwd|sysvinit-utils|tar|lsb-base|sgml-base|readline-common|libpam.*|libsemanage.*|libselinux1|libsepol2|libaudit.*|libdebian-installer4|libnewt0.52|libslang2|libtextwrap1|libcrypt1|libssl3|libcap-ng0|libelogind0|libkmod2|libpcre2-8-0)$'
mapfile -t pkgs < <(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
    --no-breaks --no-replaces --no-enhances --no-pre-depends "${roots[@]}" |
    grep '^\w' | sort -u | grep -Ev "$skip")
(cd "$out" && for p in "${pkgs[@]}"; do
    ls "${p}"_*.deb >/dev/null 2>&1 || apt-get download "$p" >/dev/null 2>&1
done)
# Record the exact versions: the model card cites them.
(cd "$out" && ls *.deb | sed 's/_amd64.deb$//; s/_all.deb$//' | sort > VERSIONS)
echo "$(ls "$out"/*.deb | wc -l) packages, $(du -sh "$out" | cut -f1) in $out"
