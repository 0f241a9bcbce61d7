#!/usr/bin/env bash
# A device call sends the working tree (tracked files and carried paths) and refuses more than
# 64 MiB. With the bundled model (18 MB) the tree is 58 MB, and training carries .train (29 MB):
# `slim` moves the three random-weight parity fixtures (29 MB, not needed on the GPU machine) out
# of the tree, `restore` puts them back. Run `restore` as soon as the device call has returned.
#
#   bash tools/train/device_tree.sh slim      # before the call
#   bash tools/train/device_tree.sh restore   # after it
set -euo pipefail
cd "$(dirname "$0")/../.."
stash=${PARLANCE_STASH:-/tmp/parlance-fixture-stash}
fixtures=(tests/fixtures/whisper/tiny-en tests/fixtures/whisper/tiny-multi tests/fixtures/whisper/v3-layout)
case "${1:-}" in
slim)
    if [ -e "$stash" ]; then echo "$stash exists: restore first" >&2; exit 1; fi
    mkdir -p "$stash/whisper"
    for f in "${fixtures[@]}"; do mv "$f" "$stash/whisper/"; done
    echo "tracked files now $(git ls-files -z | xargs -0 cat 2>/dev/null | wc -c) bytes (fixtures in $stash)"
    ;;
restore)
    if [ ! -d "$stash/whisper" ]; then echo "nothing stashed in $stash" >&2; exit 1; fi
    for f in "${fixtures[@]}"; do
        [ -e "$f" ] && { echo "$f is back already" >&2; exit 1; }
        mv "$stash/whisper/$(basename "$f")" "$f"
    done
    rm -rf "$stash"
    git status --short tests/fixtures | head -3
    ;;
*)
    echo "usage: device_tree.sh slim|restore" >&2; exit 2 ;;
esac
