# Sourced by scripts/setup.sh and bench/run.sh: fetches pinned npm tarballs into $CACHE/npm.
# Needs CACHE set and a log function (defined here if the caller has none).
declare -F log >/dev/null || log() { printf '[parlance] %s\n' "$*" >&2; }

# fetch_npm NAME VERSION SHA512-INTEGRITY -> prints the path of the verified tarball
fetch_npm() {
  local name="$1" version="$2" integrity="$3"
  mkdir -p "$CACHE/npm"
  local file="$CACHE/npm/$(echo "$name" | tr '/@' '__')-$version.tgz"
  if [ ! -f "$file" ] || [ "sha512-$(openssl dgst -sha512 -binary "$file" | base64 -w0)" != "$integrity" ]; then
    log "fetching npm $name@$version"
    local tmp; tmp="$(mktemp -d)"
    (cd "$tmp" && npm pack "$name@$version" --silent >/dev/null)
    mv "$tmp"/*.tgz "$file"; rm -rf "$tmp"
    local got="sha512-$(openssl dgst -sha512 -binary "$file" | base64 -w0)"
    if [ "$got" != "$integrity" ]; then
      rm -f "$file"
      log "integrity mismatch for $name@$version: expected $integrity, got $got"; exit 1
    fi
  fi
  echo "$file"
}
