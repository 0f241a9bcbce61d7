#!/usr/bin/env bash
# Builds llama.cpp's tools from the pinned bundle (node-llama-cpp 3.21.1's llama.cpp, unpacked by
# scripts/setup.sh into the cache) with the ggml flags parlance's own ggml has (OpenMP, OpenBLAS,
# no llamafile GEMM, native CPU), so a comparison differs in the programs, not in the build. The
# anchor for bench/qwen3_bench.sh (llama-bench), bench/qwen3_asr_bench.sh (llama-mtmd-cli) and
# bench/chat_bench.sh (llama-server, without its web UI).
# Prints the path of the first target's binary on stdout; logs go to the build folder.
# Usage: bench/build_llama_bench.sh [TARGET...]     (default: llama-bench)
set -euo pipefail
CACHE="${PARLANCE_CACHE:-$HOME/.cache/parlance}"
SRC="${LLAMA_SRC:-$CACHE/llama.cpp-3.21.1}"
B="$CACHE/bench/llama.cpp-3.21.1-build"
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(llama-bench)
log() { printf '[llama-build] %s\n' "$*" >&2; }
[ -f "$SRC/CMakeLists.txt" ] || { echo "no llama.cpp source at $SRC (run scripts/setup.sh first)" >&2; exit 1; }
missing=0
for t in "${targets[@]}"; do [ -x "$B/bin/$t" ] || missing=1; done
if [ "$missing" = 1 ]; then
  command -v ninja >/dev/null || { echo "ninja is needed (apt-get install ninja-build)" >&2; exit 1; }
  mkdir -p "$B"
  log "configuring llama.cpp in $B"
  cmake -S "$SRC" -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE="${GGML_NATIVE:-ON}" -DGGML_OPENMP=ON -DGGML_LLAMAFILE=OFF \
    -DGGML_BLAS=ON -DGGML_BLAS_VENDOR=OpenBLAS >"$B/configure.log" 2>&1 || { tail -30 "$B/configure.log" >&2; exit 1; }
  log "building ${targets[*]} (several minutes on 2 cores)"
  cmake --build "$B" --target "${targets[@]}" -j"${JOBS:-$(nproc)}" >"$B/build.log" 2>&1 \
    || { tail -40 "$B/build.log" >&2; exit 1; }
fi
echo "$B/bin/${targets[0]}"
