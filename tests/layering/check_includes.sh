#!/usr/bin/env bash
# The layers' include direction (docs/architecture.md §1): a file of src/LAYER/ includes only
# headers of its own layer and of the layers below it, in this order:
#   core < audio < text < decoding < models < engine < server < cli
# and no architecture's header (src/models/<arch>/) is included outside src/models/. Linking
# catches a wrong-way call, not a wrong-way include of a header alone; this check catches both.
# Usage: tests/layering/check_includes.sh [SRC_DIR]   (exit 1 and one line per offending include)
set -euo pipefail
SRC="${1:-$(cd "$(dirname "$0")/../.." && pwd)/src}"
layers=(core audio text decoding models engine server cli)
rank() { local i; for i in "${!layers[@]}"; do [ "${layers[$i]}" = "$1" ] && { echo "$i"; return; }; done; echo -1; }
bad=0
while IFS= read -r line; do
  file="${line%%:*}"; rest="${line#*:}"; lineno="${rest%%:*}"; inc="${rest#*:}"
  target="$(sed -E 's/^[[:space:]]*#include[[:space:]]+"([^"]+)".*/\1/' <<<"$inc")"
  from="$(sed -E "s#^$SRC/([^/]+)/.*#\1#" <<<"$file")"
  to="${target%%/*}"
  [ "$to" = "$target" ] && continue  # a sibling include ("x.h"), not a layer path
  rf="$(rank "$from")"; rt="$(rank "$to")"
  [ "$rt" = -1 ] && continue         # not one of ours (e.g. "llama-grammar.h")
  if [ "$rt" -gt "$rf" ]; then
    echo "${file#$SRC/}:$lineno: $from includes $target ($to is above $from)"; bad=1
  fi
  if [ "$to" = models ] && [ "$from" != models ] && [[ "$target" == models/*/* ]]; then
    echo "${file#$SRC/}:$lineno: $target is an architecture's header, included outside src/models/"; bad=1
  fi
done < <(grep -rn --include='*.h' --include='*.cpp' -E '^[[:space:]]*#include[[:space:]]+"' "$SRC")
[ "$bad" = 0 ] && echo "every include of src/ goes down the layers"
exit "$bad"
