#!/usr/bin/env bash
# Builds ggml's CUDA backend and parlance on a bare GPU machine that has CUDA (nvcc), CMake, ninja and
# a C++ compiler but none of our apt packages and no network, then runs `parlance info` and the
# Whisper parity check on cuda and cpu. Everything it needs travels in .device/cuda/ (ignored by git):
#   .device/cuda/ggml-src.tar.xz   llama.cpp's ggml/ folder (CMakeLists, cmake/, include/, src/ with
#                                  only the cpu, blas and cuda backends), from $LLAMA_SRC of setup.sh
#   .device/cuda/debs/*.deb        Debian bookworm packages of our small build deps (see docs/cuda.md),
#                                  unpacked with dpkg -x into a private sysroot, never into /
# Prepare that folder here with `scripts/device_cuda_check.sh --prepare` (needs apt-get and setup.sh's
# cache), then on the GPU machine run `scripts/device_cuda_check.sh` from the repo root.
#
# The build runs detached (setsid) under $STATE, so a command-time limit does not kill it: the script
# waits up to WAIT_S seconds (default 540), copies logs into $OUT (default $STATE/out), and exits 3 if
# still running. Running it again on the same machine waits again for a build still running, or,
# after a finished one, rebuilds parlance and reruns the checks (keeping the installed ggml).
# Exit: 0 all steps ran (see summary.txt for their status), 1 a step failed, 3 still running.
#
# COMMIT=<sha> names the commit in summary.txt (the copy on the machine has no .git).
# Options: --prepare (fill .device/cuda here)   --cpu (no CUDA: use setup.sh's cpu ggml, -j1; to
# check this script and the PARLANCE_FFMPEG=OFF build on a CPU-only machine)   --serve-bench (instead
# of the checks: build whisper.cpp's serial anchor against the same ggml and run bench/serve_bench.sh
# with the bundled model on the device; its table lands in serve_bench.log)
set -uo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CARRY="$ROOT/.device/cuda"
MODE=cuda
ACTION=run
ONLY="${ONLY:-}"  # serve_bench: build, then only bench/serve_bench.sh with the bundled model
for arg in "$@"; do
  case "$arg" in
    --prepare) ACTION=prepare ;;
    --cpu) MODE=cpu ;;
    --stages) ACTION=stages ;;
    --serve-bench) ONLY=serve_bench ;;
    --throughput) ONLY=throughput ;;
    --gpu-bench) ONLY=gpu_bench ;;
    *) echo "device_cuda_check.sh: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done
STATE="${STATE:-/tmp/parlance-device-$MODE}"
OUT="${OUT:-$STATE/out}"
WAIT_S="${WAIT_S:-540}"
JOBS="${JOBS:-$(nproc)}"
[ "$MODE" = cpu ] && JOBS=1
SYSROOT="$STATE/sysroot"
ARCH_LIB=x86_64-linux-gnu

# ---------------------------------------------------------------- --prepare (on the dev machine)
if [ "$ACTION" = prepare ]; then
  set -e
  LLAMA_SRC="${LLAMA_SRC:-$HOME/.cache/parlance/llama.cpp-3.21.1}"
  mkdir -p "$CARRY/debs"
  skip=()
  for b in cann et hexagon hip metal musa opencl openvino rpc sycl virtgpu vulkan webgpu zdnn zendnn; do
    skip+=("--exclude=ggml/src/ggml-$b")
  done
  # The CPU backend's code for other architectures (CMake compiles it only there): the device copy
  # of the tree is capped at 64 MiB, and the tracked tree is 62.7 MB.
  for a in arm loongarch powerpc riscv s390 wasm; do skip+=("--exclude=ggml/src/ggml-cpu/arch/$a"); done
  skip+=("--exclude=ggml/src/ggml-cpu/spacemit" "--exclude=ggml/src/ggml-cpu/kleidiai")
  # xz, not gzip: 0.57 MB instead of 0.84 (the tree plus the carry must stay under 64 MiB).
  export XZ_OPT=-9e
  rm -f "$CARRY/ggml-src.tar.gz"
  tar cJf "$CARRY/ggml-src.tar.xz" -C "$LLAMA_SRC" "${skip[@]}" ggml
  # The bundle's pieces cmake/llama_common builds (Jinja, GBNF grammar, JSON schema converter).
  tar cJf "$CARRY/llama-common-src.tar.xz" -C "$LLAMA_SRC" common/jinja common/json.h common/json.cpp \
    common/unicode.h common/unicode.cpp common/json-schema-to-grammar.h common/json-schema-to-grammar.cpp \
    common/common.h src/llama-grammar.h src/llama-grammar.cpp src/llama-impl.h src/llama-vocab.h \
    src/llama-sampler.h include/llama.h include/llama-cpp.h
  # llama.cpp's own sources but ggml (bench/gpu_bench.sh's anchors: llama-batched-bench and
  # llama-server, built against the ggml above), without the web UI's sources and assets.
  tar cJf "$CARRY/llama-src.tar.xz" -C "$LLAMA_SRC" --exclude=tools/ui/src --exclude=tools/ui/static \
    --exclude=tools/ui/tests --exclude='tools/ui/package*' --exclude='tools/server/public*' --exclude='*.md' \
    --exclude=tools/mtmd/legacy-models CMakeLists.txt cmake common include src tools vendor licenses LICENSE \
    ggml/cmake scripts/ui-assets.cmake
  # whisper.cpp's sources (the bench anchor, npm @fugood/whisper.node as bench/run.sh unpacks them).
  WCPP="$HOME/.cache/parlance/whisper.node-1.1.3"
  [ -d "$WCPP/whisper.cpp/src" ] && tar czf "$CARRY/whisper-cpp-src.tar.gz" -C "$WCPP/whisper.cpp" src include
  # The real Qwen3 tokenizer (setup.sh's assets) for the Qwen3 checkpoints the check writes.
  tar cJf "$CARRY/qwen3tok.tar.xz" -C "${PARLANCE_ASSETS:-$HOME/.cache/parlance/assets}/qwen3" .
  # Silero VAD v5 (setup.sh's assets) for the live sessions of gpu_bench's GB_LIVE.
  cp "${PARLANCE_ASSETS:-$HOME/.cache/parlance/assets}/silero_vad_v5.onnx" "$CARRY/"
  # Debian packages of our small build deps, unpacked here and kept to what the build reads
  # (headers, the shared libraries we link, libz.a, .pc and CMake files, pkgconf): one sysroot
  # tarball, a third of the .debs' size (the device copy of the tree is capped at 64 MiB).
  rm -rf "$CARRY/debs" "$CARRY/sysroot-tmp"; mkdir -p "$CARRY/debs" "$CARRY/sysroot-tmp"
  (cd "$CARRY/debs" && apt-get download nlohmann-json3-dev libcli11-dev libpcre2-dev libpcre2-8-0 \
    libutf8proc-dev libutf8proc2 zlib1g-dev zlib1g pkgconf pkgconf-bin libpkgconf3 libonnx-dev libonnx1 libonnxifi \
    libsleef-dev libsleef3)
  for f in "$CARRY"/debs/*.deb; do dpkg -x "$f" "$CARRY/sysroot-tmp"; done
  (cd "$CARRY/sysroot-tmp" && rm -rf usr/share/doc usr/share/man usr/share/lintian usr/bin/pcre2* \
    usr/lib/$ARCH_LIB/libpcre2-8.a usr/lib/$ARCH_LIB/libpcre2-16* usr/lib/$ARCH_LIB/libpcre2-32* \
    usr/lib/$ARCH_LIB/libpcre2-posix* usr/lib/$ARCH_LIB/libutf8proc.a usr/share/aclocal \
    usr/lib/$ARCH_LIB/libsleefgnuabi*)
  # Of ONNX, parlance includes onnx/onnx_pb.h (which includes onnx-ml.pb.h) and links onnx_proto.
  # ONNX's CMake config checks that every library it declares exists, so libonnx.so.1 (3 MB, the
  # checker and shape inference we never link) stays as an empty placeholder.
  (cd "$CARRY/sysroot-tmp/usr/include/onnx" && find . -mindepth 1 -maxdepth 1 ! -name onnx_pb.h ! -name onnx-ml.pb.h -exec rm -rf {} +)
  : >"$CARRY/sysroot-tmp/usr/lib/$ARCH_LIB/libonnx.so.1"
  tar cJf "$CARRY/sysroot.tar.xz" -C "$CARRY/sysroot-tmp" .
  rm -rf "$CARRY/debs" "$CARRY/sysroot-tmp"
  du -sh "$CARRY"
  exit 0
fi

# ---------------------------------------------------------------- --stages (the detached build)
stage() {  # stage NAME COMMAND... : runs one step, logs to $STATE/NAME.log, records status and time
  local name="$1"; shift
  local t0=$SECONDS
  "$@" >"$STATE/$name.log" 2>&1
  local rc=$?
  printf '%-16s rc=%-3s %4ss\n' "$name" "$rc" "$((SECONDS - t0))" >>"$STATE/summary.txt"
  return $rc
}

unpack_sysroot() {
  rm -rf "$SYSROOT"; mkdir -p "$SYSROOT"
  if [ -f "$CARRY/sysroot.tar.xz" ]; then
    tar xJf "$CARRY/sysroot.tar.xz" -C "$SYSROOT" || return 1
  else  # an older --prepare: the .debs themselves
    for f in "$CARRY"/debs/*.deb; do dpkg -x "$f" "$SYSROOT" || return 1; done
  fi
  # .pc files say prefix=/usr: point them at the sysroot.
  for pc in "$SYSROOT"/usr/lib/$ARCH_LIB/pkgconfig/*.pc "$SYSROOT"/usr/share/pkgconfig/*.pc; do
    [ -f "$pc" ] && sed -i "s|^prefix=/usr|prefix=$SYSROOT/usr|" "$pc"
  done
  mkdir -p "$STATE/bin"
  # The machine's pkg-config if it has one, else Debian's pkgconf from the sysroot (named explicitly:
  # CMake would otherwise pick the sysroot's usr/bin/pkg-config through CMAKE_PREFIX_PATH).
  if command -v pkg-config >/dev/null; then
    ln -sf "$(command -v pkg-config)" "$STATE/bin/pkg-config"
  else
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$SYSROOT/usr/lib/$ARCH_LIB" \
      "$SYSROOT/usr/bin/pkgconf" >"$STATE/bin/pkg-config"
    chmod +x "$STATE/bin/pkg-config"
  fi
  ls -R "$SYSROOT" | head -50
  PKG_CONFIG_PATH="$PKGCFG" "$STATE/bin/pkg-config" --modversion libpcre2-8 libutf8proc zlib
}

build_ggml_cuda() {
  rm -rf "$STATE/ggml-src" "$STATE/ggml-build"; mkdir -p "$STATE/ggml-src"
  if [ -f "$CARRY/ggml-src.tar.xz" ]; then
    tar xJf "$CARRY/ggml-src.tar.xz" -C "$STATE/ggml-src" || return 1
  else  # an older --prepare
    tar xzf "$CARRY/ggml-src.tar.gz" -C "$STATE/ggml-src" || return 1
  fi
  # ggml/ alone is not standalone here (its ggml.pc.in lives outside it): configure it as a
  # subproject, the way llama.cpp's root does.
  bash "$ROOT/scripts/lib/ggml_cuda_exact_f32.sh" "$STATE/ggml-src/ggml" || return 1
  bash "$ROOT/scripts/lib/ggml_cuda_f16_f32acc.sh" "$STATE/ggml-src/ggml" || return 1
  printf 'cmake_minimum_required(VERSION 3.18)\nproject(ggml_outer C CXX)\nadd_subdirectory(ggml)\n' \
    >"$STATE/ggml-src/CMakeLists.txt"
  cmake -S "$STATE/ggml-src" -B "$STATE/ggml-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DGGML_NATIVE=ON -DGGML_OPENMP=ON \
    -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" -DGGML_CUDA_FA=ON -DGGML_CUDA_FA_ALL_QUANTS=OFF -DGGML_CUDA_GRAPHS=ON \
    -DGGML_CUDA_NCCL=OFF -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF \
    -DCMAKE_INSTALL_PREFIX="$GGML_PREFIX" || return 1
  cmake --build "$STATE/ggml-build" --target ggml ggml-base ggml-cpu ggml-cuda -j"$JOBS" || return 1
  cmake --install "$STATE/ggml-build/ggml" || return 1
  touch "$GGML_PREFIX/.parlance-ok"
}

# The bundle's Jinja engine and grammar (cmake/llama_common), as setup.sh builds them.
build_llama_common() {
  rm -rf "$STATE/llama-src" "$STATE/llama-common-build"; mkdir -p "$STATE/llama-src"
  tar xJf "$CARRY/llama-common-src.tar.xz" -C "$STATE/llama-src" || return 1
  cmake -S "$ROOT/cmake/llama_common" -B "$STATE/llama-common-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_SRC="$STATE/llama-src" -DCMAKE_PREFIX_PATH="$GGML_PREFIX;$SYSROOT/usr" \
    -DCMAKE_INSTALL_PREFIX="$PCACHE/llama-common-3.21.1-b3" || return 1
  cmake --build "$STATE/llama-common-build" -j"$JOBS" || return 1
  cmake --install "$STATE/llama-common-build" || return 1
}

build_parlance() {
  local cuda=OFF; [ "$MODE" = cuda ] && cuda=ON
  PKG_CONFIG_PATH="$PKGCFG" cmake -S "$ROOT" -B "$STATE/build" -G Ninja \
    -DPKG_CONFIG_EXECUTABLE="$STATE/bin/pkg-config" \
    -DCMAKE_BUILD_TYPE=Release -DPARLANCE_CUDA=$cuda -DPARLANCE_FFMPEG=OFF -DPARLANCE_TESTS=OFF \
    -DPARLANCE_CACHE="$PCACHE" -DCMAKE_PREFIX_PATH="$SYSROOT/usr" || return 1
  cmake --build "$STATE/build" --target parlance write_qwen3_fixture -j"$JOBS" || return 1
  ldd "$STATE/build/parlance"
}

run_w() { LD_LIBRARY_PATH="$SYSROOT/usr/lib/$ARCH_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$STATE/build/tests/write_qwen3_fixture" "$@"; }
run_parlance() { LD_LIBRARY_PATH="$SYSROOT/usr/lib/$ARCH_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$STATE/build/parlance" "$@"; }
# A server in the background, $! its own pid: a function run with & is a subshell, and killing
# that left parlance running and holding the GPU's memory (2026-12-06: the next mode's server and
# the transformers anchor then ran short of memory).
spawn_parlance() { LD_LIBRARY_PATH="$SYSROOT/usr/lib/$ARCH_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$STATE/build/parlance" "$@" & }

# Batch invariance through the server (what Serve.ConcurrentRequestsGiveTheSameBytesAsOneAtATime
# and Chat.ConcurrentRequestsEqualAlone check on the CPU): four requests one at a time, then all
# four at once, on DEVICE; the bodies must be the same bytes. KIND: whisper (tiny-multi),
# qwen3_asr (the tiny checkpoint written above), chat (the tiny Qwen3, seeded sampling).
serve_invariance() {
  local device="$1" kind="$2" port=$((18200 + RANDOM % 500)) fx="$ROOT/tests/fixtures" same=0 i pid
  local clips=(audio/jfk.wav audio/sense_and_sensibility_01_austen_64kb-0880.wav audio/espeak_quiet_loud.wav
               audio/sense_and_sensibility_01_austen_64kb-0930.wav)
  local model=(--model "$fx/whisper/tiny-multi/model")
  [ "$kind" = qwen3_asr ] && model=(--model "$STATE/qwen3-asr-tiny")
  [ "$kind" = chat ] && model+=(--chat-model "$STATE/qwen3-tiny" --chat-model-id qwen3-tiny)
  spawn_parlance serve --device "$device" --port "$port" --max-new-tokens 24 --cache-slots 8 "${model[@]}" ${SERVE_EXTRA:-} \
    >"$STATE/serve_${kind}_$device.log" 2>&1
  pid=$!
  for _ in $(seq 1 120); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.5; done
  post() {
    if [ "$kind" = chat ]; then
      # A long system turn (a prefill of many columns) and seeded sampling: every token depends on
      # the logits' exact values, not only on their argmax.
      python3 -c 'import json,sys; i=int(sys.argv[1]); print(json.dumps({"model":"qwen3-tiny",
        "messages":[{"role":"system","content":" ".join(["You answer briefly and precisely."]*(8+5*i))},
                    {"role":"user","content":"Question number %d" % i}],
        "max_tokens":16,"temperature":0.8,"seed":100+i,"ignore_eos":True,"logprobs":True}))' "$1" |
        curl -s -H 'Content-Type: application/json' --data-binary @- "http://127.0.0.1:$port/v1/chat/completions" |
        python3 -c 'import json,sys; r=json.load(sys.stdin); c=r["choices"][0]; print(json.dumps([c["message"]["content"], c["logprobs"]]))' >"$2"
    else
      curl -s -F "file=@$fx/${clips[$1]}" -F temperature=0 -F model=whisper-1 -F response_format=verbose_json \
        "http://127.0.0.1:$port/v1/audio/transcriptions" >"$2"
    fi
  }
  for i in 0 1 2 3; do post "$i" "$STATE/alone_${kind}_$device.$i"; done
  for i in 0 1 2 3; do post "$i" "$STATE/together_${kind}_$device.$i" & done
  wait $(jobs -p | grep -v "^$pid$") 2>/dev/null
  for i in 0 1 2 3; do
    if [ -s "$STATE/alone_${kind}_$device.$i" ] && cmp -s "$STATE/alone_${kind}_$device.$i" "$STATE/together_${kind}_$device.$i"; then
      same=$((same + 1))
    else
      echo "request $i: alone $(head -c 300 "$STATE/alone_${kind}_$device.$i") vs together $(head -c 300 "$STATE/together_${kind}_$device.$i")"
    fi
  done
  kill "$pid"; wait "$pid" 2>/dev/null
  echo "$same of 4 checks identical ($kind: concurrent requests == one at a time, serve --device $device)"
  [ "$same" = 4 ]
}

# Qwen3-ASR-0.6B's full widths over the layout-0.6b fixture's config (the tests' generator's --edit).
ASR_06B_EDIT='{"audio_config":{"d_model":896,"encoder_layers":18,
"encoder_attention_heads":14,"encoder_ffn_dim":3584,"downsample_hidden_size":480,"output_dim":1024},
"text_config":{"hidden_size":1024,"intermediate_size":3072,"num_hidden_layers":28,"num_attention_heads":16,
"num_key_value_heads":8,"head_dim":128}}'

# What f32 accumulation costs on the GPU (issue 19): the Qwen3-ASR 0.6B layout at full width
# (random weights, f16 GGUF pair, as bench/qwen3_asr_bench.sh writes it) transcribes a 33 s clip with
# a fixed number of tokens, three times with every product in f32 (ours) and three times with
# PARLANCE_GPU_ACCUMULATION=default (ggml-cuda's f16 cuBLAS path for f16 weights). Prints each
# run's --timings line and whether the two texts agree.
accumulation_cost() {
  local dir="$STATE/qwen3-asr-full-f16" clip="$STATE/clip33.wav" mode r
  run_w asr:layout-0.6b "$dir" --gguf --f16 --edit "$ASR_06B_EDIT" || return 1
  python3 - "$ROOT/tests/fixtures/audio" "$clip" <<'PY' || return 1
import sys, wave
src, dst = sys.argv[1], sys.argv[2]
names = ["jfk", "sense_and_sensibility_01_austen_64kb-0880", "jfk", "espeak_quiet_loud",
         "sense_and_sensibility_01_austen_64kb-0930"]
with wave.open(dst, "wb") as w:
    for i, n in enumerate(names):
        with wave.open(f"{src}/{n}.wav") as r:
            if i == 0: w.setparams(r.getparams())
            w.writeframes(r.readframes(r.getnframes()))
PY
  for mode in f32 default; do
    for r in 1 2 3; do
      PARLANCE_GPU_ACCUMULATION=$mode run_parlance transcribe --device cuda --model "$dir" --timings \
        --max-new-tokens 64 --min-new-tokens 64 -f text -o "$STATE/acc_$mode.txt" "$clip" 2>&1 |
        grep '^timings' | sed "s/^/$mode run $r: /"
    done
  done
  cmp -s "$STATE/acc_f32.txt" "$STATE/acc_default.txt" && echo "text: default == f32" || echo "text: default differs from f32"
}

# Whisper models with no transformers reference (the compact fixture, the bundled default model):
# greedy and beam-search text on cuda must be cpu's, clip for clip, with the same binary.
devices_agree() {
  local model="$1" same=0 total=0 clip beam device
  for clip in jfk espeak_quiet_loud sense_and_sensibility_01_austen_64kb-0880; do
    for beam in 1 3; do
      total=$((total + 1))
      rm -f "$STATE"/agree_*.txt
      for device in cpu cuda; do
        run_parlance transcribe --device "$device" --model "$model" --temperature 0 --beam-size "$beam" \
          --max-new-tokens 48 -f text -o "$STATE/agree_$device.txt" "$ROOT/tests/fixtures/audio/$clip.wav" || return 1
      done
      if cmp -s "$STATE/agree_cpu.txt" "$STATE/agree_cuda.txt"; then
        same=$((same + 1))
      else
        echo "$clip, beam $beam: cpu '$(cat "$STATE/agree_cpu.txt")' vs cuda '$(cat "$STATE/agree_cuda.txt")'"
      fi
    done
  done
  echo "$same of $total checks identical (cuda text == cpu text, greedy and beam 3, $model)"
  [ "$same" = "$total" ]
}

# Issue 19's op-by-op comparison: one clip through the Qwen3-ASR 0.6B layout (encoder, prompt, one
# token) traced on cpu and cuda (PARLANCE_TRACE_OPS), then tools/op_trace/compare.py ranks the ops
# by how much they add to the difference. The clip is a slice of a fixture recording, as the
# reference's clips are (short_0.3s: jfk.wav from 1 s, 0.3 s).
op_trace() {
  local model="$1" first="$2" samples="$3" clip="$STATE/trace_clip.wav"
  python3 - "$ROOT/tests/fixtures/audio/jfk.wav" "$clip" "$first" "$samples" <<'PY' || return 1
import sys, wave
src, dst, first, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
with wave.open(src) as r:
    params = r.getparams()
    r.setpos(first)
    frames = r.readframes(n)
with wave.open(dst, "wb") as w:
    w.setparams(params)
    w.writeframes(frames)
PY
  rm -rf "$STATE/trace_cpu" "$STATE/trace_cuda"
  # The cuda run also logs cuBLAS's calls: which products reach it, with which operand types and
  # math mode (how ggml_conv_2d's f16 columns were found, docs/cuda.md).
  rm -f "$STATE/cublas_calls.txt"
  for device in cpu cuda; do
    CUBLAS_LOGINFO_DBG=1 CUBLAS_LOGDEST_DBG="$STATE/cublas_calls.txt" PARLANCE_TRACE_OPS="$STATE/trace_$device" \
      run_parlance transcribe --device "$device" --model "$model" --max-new-tokens 1 --format json "$clip" || return 1
  done
  du -sh "$STATE/trace_cpu" "$STATE/trace_cuda"
  python3 "$ROOT/tools/op_trace/compare.py" "$STATE/trace_cpu" "$STATE/trace_cuda" --top 40
  echo "-- cuBLAS functions called by the cuda run (count):"
  grep -o 'function cublasStatus_t [A-Za-z0-9_]*' "$STATE/cublas_calls.txt" | sort | uniq -c
  echo "-- operand types and compute types (count):"
  grep -oE '(Atype|computeType): type=[A-Za-z_]*; val=[A-Z0-9_]*' "$STATE/cublas_calls.txt" | sort | uniq -c
  echo "-- math modes set:"
  grep -o 'val=CUBLAS_[A-Z0-9_]*MATH[A-Z0-9_]*' "$STATE/cublas_calls.txt" | sort | uniq -c
}

# whisper.cpp (bench/anchor/whisper_cpp_serial) built against the same ggml (CUDA) as parlance.
build_whisper_anchor() {
  local src="$STATE/whisper.cpp"
  rm -rf "$src" "$STATE/bench-build"; mkdir -p "$src"
  tar xzf "$CARRY/whisper-cpp-src.tar.gz" -C "$src" || return 1
  local cuda=OFF; [ "$MODE" = cuda ] && cuda=ON
  PKG_CONFIG_PATH="$PKGCFG" cmake -S "$ROOT/bench" -B "$STATE/bench-build" -G Ninja \
    -DPKG_CONFIG_EXECUTABLE="$STATE/bin/pkg-config" -DCMAKE_BUILD_TYPE=Release -DPARLANCE_CUDA=$cuda \
    -DPARLANCE_FFMPEG=OFF -DPARLANCE_CACHE="$PCACHE" -DWHISPER_CPP_DIR="$src" \
    -DCMAKE_PREFIX_PATH="${GGML_PREFIX:+$GGML_PREFIX;}$SYSROOT/usr" || return 1
  cmake --build "$STATE/bench-build" --target whisper_cpp_serial -j"$JOBS"
}

# bench/serve_bench.sh with the bundled model on the device: parlance serve vs whisper.cpp serial.
serve_bench_device() {
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$SYSROOT/usr/lib/$ARCH_LIB" "$STATE/build/parlance" \
    >"$STATE/bin/parlance"
  chmod +x "$STATE/bin/parlance"
  local device=cuda; [ "$MODE" = cuda ] || device=cpu
  PARLANCE="$STATE/bin/parlance" WHISPER_CPP_SERIAL="$STATE/bench-build/whisper_cpp_serial" \
    bash "$ROOT/bench/serve_bench.sh" --model-dir "$ROOT/models/parlance-synth-en" --device "$device" \
    --threads "${BENCH_THREADS:-4}" --levels "${BENCH_LEVELS:-1 4 8 16}" --per-client "${BENCH_PER:-2}"
}

# The throughput step on the GPU (issue 51): every fixture's parity on cuda in the default
# (throughput) mode and under --deterministic, the server's batch invariance under --deterministic,
# then the Qwen3-ASR 1.7B layout (random weights, f16 GGUF pair) served on cuda under
# bench/load_gen.py at TP_LEVELS (an 11 s clip, 40 tokens at most: random weights repeat a token),
# --deterministic, the default and the default with 8 encoder passes a step in turn.
throughput() {
  local dir="$STATE/qwen3-asr-1.7b" port mode c pid ref name kind w
  mkdir -p "$PCACHE/assets/qwen3"
  [ -f "$CARRY/qwen3tok.tar.xz" ] && tar xJf "$CARRY/qwen3tok.tar.xz" -C "$PCACHE/assets/qwen3"
  for ref in "$ROOT"/tests/fixtures/whisper/*/; do
    ref="${ref%/}"; [ -f "$ref/reference.json" ] || continue
    for mode in ${TP_PARITY-default --deterministic}; do
      [ "$mode" = default ] && mode=""
      echo "-- parity whisper $(basename "$ref") on cuda ${mode:-(throughput)}: $(run_parlance parity "$ref" --device cuda $mode 2>&1 | grep -E 'checks identical|error' | tail -1)"
    done
  done
  for ref in "$ROOT"/tests/fixtures/qwen3/*/ "$ROOT"/tests/fixtures/qwen3_asr/*/; do
    ref="${ref%/}"; name="$(basename "$ref")"
    kind=qwen3; w=$name; [[ "$ref" == *qwen3_asr* ]] && kind=qwen3-asr && w="asr:$name"
    [ -f "$STATE/$kind-$name/config.json" ] || run_w "$w" "$STATE/$kind-$name" >/dev/null || continue
    for mode in ${TP_PARITY-default --deterministic}; do
      [ "$mode" = default ] && mode=""
      echo "-- parity $kind $name on cuda ${mode:-(throughput)}: $(run_parlance parity "$ref" --model "$STATE/$kind-$name" --device cuda $mode 2>&1 | grep -E 'checks identical|error' | tail -1)"
    done
  done
  # TP_PARITY: the parity modes (default: "default --deterministic"; "" none). TP_PARITY_ONLY=1:
  # the fixtures' parity and nothing else (a short call).
  [ -n "${TP_PARITY_ONLY:-}" ] && return 0
  for kind in ${TP_INVARIANCE-whisper qwen3_asr chat}; do
    SERVE_EXTRA=--deterministic serve_invariance cuda "$kind" | tail -2
  done
  run_w asr:layout-0.6b "$dir" --gguf --f16 --edit '{"audio_config":{"d_model":1024,"encoder_layers":24,
"encoder_attention_heads":16,"encoder_ffn_dim":4096,"downsample_hidden_size":480,"output_dim":2048},
"text_config":{"hidden_size":2048,"intermediate_size":6144,"num_hidden_layers":28,"num_attention_heads":16,
"num_key_value_heads":8,"head_dim":128}}' >/dev/null || return 1
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
  # TP_PROFILE=1: one request alone under PARLANCE_PROFILE_OPS (each node timed, synchronised).
  if [ -n "${TP_PROFILE:-}" ]; then
    PARLANCE_PROFILE_OPS=1 run_parlance transcribe --device cuda --model "$dir" --timings --max-new-tokens 40 \
      --min-new-tokens 40 -f text -o /dev/null "$ROOT/tests/fixtures/audio/jfk.wav" >"$STATE/profile.log" 2>&1
    echo "-- op profile, one request (1.7B layout, jfk.wav, 40 tokens):"; grep -A45 '^op profile' "$STATE/profile.log"
  fi
  # TP_MODES: the serve modes, ';'-separated ("default" = no extra flag; "nographs ..." = with
  # GGML_CUDA_DISABLE_GRAPHS=1, ggml-cuda's graph capture off).
  local modes graphs
  IFS=';' read -r -a modes <<<"${TP_MODES:---deterministic;default;--encode-batch 8}"
  for mode in "${modes[@]}"; do
    graphs=""
    if [[ "$mode" == nographs* ]]; then graphs=1; mode="${mode#nographs}"; mode="${mode# }"; echo "(CUDA graphs off)"; fi
    [ "$mode" = default ] && mode=""
    port=$((18800 + RANDOM % 500))
    # (ggml-cuda reads only whether the variable is set)
    if [ -n "$graphs" ]; then export GGML_CUDA_DISABLE_GRAPHS=1; else unset GGML_CUDA_DISABLE_GRAPHS; fi
    spawn_parlance serve --device cuda --port "$port" --model "$dir" $mode \
      --max-new-tokens 40 --max-queue 1024 --cache-slots 256 --kv-cache-mb 8192 >"$STATE/serve_tp.log" 2>&1
    pid=$!
    for _ in $(seq 1 240); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.5; done
    for c in ${TP_LEVELS:-1 8 64}; do
      echo "${mode:-throughput}: $(python3 "$ROOT/bench/load_gen.py" --url "http://127.0.0.1:$port" \
        --file "$ROOT/tests/fixtures/audio/jfk.wav" --concurrency "$c" --requests $((c < 8 ? 8 : ${GB_ROUNDS:-2} * c)))"
      echo "metrics: $(curl -s "http://127.0.0.1:$port/metrics" | grep -E '^parlance_(decoder_steps_total|decode_tokens_total|encoded_pieces_total|engine_seconds_total|gpu_graphs)' | tr '\n' ' ')"
    done
    kill "$pid"; wait "$pid" 2>/dev/null
    echo "server log's end: $(tail -3 "$STATE/serve_tp.log" | tr '\n' ' ')"
    unset GGML_CUDA_DISABLE_GRAPHS
  done
  # One request alone, phase by phase (encoder, prompt, decode), in each mode.
  for mode in ${TP_TIMINGS---deterministic default}; do
    [ "$mode" = default ] && mode=""
    echo "timings ${mode:-throughput}: $(run_parlance transcribe --device cuda --model "$dir" $mode --timings \
      --max-new-tokens 40 --min-new-tokens 40 -f text -o /dev/null "$ROOT/tests/fixtures/audio/jfk.wav" 2>&1 | grep '^timings')"
  done
}

# llama.cpp's tools from the pinned bundle against the ggml built above (the same CUDA kernels
# parlance runs; the exact-f32 patch touches f32 weights only, and the anchors' are f16).
build_llama_tools() {
  rm -rf "$STATE/llama-full" && mkdir -p "$STATE/llama-full" || return 1
  tar xJf "$CARRY/llama-src.tar.xz" -C "$STATE/llama-full" || return 1
  cmake -S "$STATE/llama-full" -B "$STATE/llama-tools" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_USE_SYSTEM_GGML=ON -DCMAKE_PREFIX_PATH="$GGML_PREFIX" -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF \
    -DCMAKE_SHARED_LINKER_FLAGS="-L/usr/local/cuda/lib64 -Wl,--no-as-needed -lcudart -lcublas -lcublasLt -lcuda" \
    -DCMAKE_EXE_LINKER_FLAGS="-L/usr/local/cuda/lib64 -L/usr/local/cuda/lib64/stubs -Wl,--no-as-needed -lcudart -lcublas -lcublasLt -lcuda" \
    || return 1
  cmake --build "$STATE/llama-tools" --target llama-batched-bench llama-server -j"$JOBS" || return 1
}

# bench/gpu_bench.sh (issue 51): the Qwen3-ASR 1.7B layout (random weights, f16 GGUF pair) served
# by parlance on cuda under bench/load_gen.py at GB_LEVELS, then the anchors on the same GPU in the
# same run: transformers `generate` (bench/anchor/transformers_qwen3_asr.py, bf16, sdpa) at the
# same batch sizes, and llama.cpp's llama-batched-bench on the pair's text GGUF with the request's
# language-model shape (its prompt + 40 generated tokens per sequence). GPU busy time is sampled
# by nvidia-smi while each load runs.
# One server under load: `parlance serve --device cuda` with SERVE ARGS (its output in LOG), then
# bench/load_gen.py with LOAD ARGS at each concurrency of LEVELS, the GPU's busy share sampled
# (gpu_bench's busy), then the server's metrics; the server is stopped by its own pid.
#   load_levels LABEL LOG "LEVELS" "LOAD ARGS" SERVE ARGS...
load_levels() {
  local label="$1" log="$2" lv="$3" load="$4" port pid c
  shift 4
  port=$((18800 + RANDOM % 500))
  spawn_parlance serve --device cuda --port "$port" "$@" >"$log" 2>&1
  pid=$!
  for _ in $(seq 1 240); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.5; done
  for c in $lv; do
    # (LOAD ARGS split into words: paths without spaces)
    echo "$label c=$c: $(busy python3 "$ROOT/bench/load_gen.py" --url "http://127.0.0.1:$port" $load \
      --concurrency "$c" --requests $((c < 8 ? 8 : ${GB_ROUNDS:-2} * c)) | tr '\n' ' ')"
  done
  echo "  metrics: $(curl -s "http://127.0.0.1:$port/metrics" | grep -E '^parlance_(decoder_steps_total|decode_tokens_total|encoded_pieces_total|engine_seconds_total|kv_cache_capacity|device_memory|gpu_graphs)' | tr '\n' ' ')"
  kill "$pid"; wait "$pid" 2>/dev/null
  grep -E "KV cache|chat model|error" "$log" | head -5
}

gpu_bench() {
  local dir="$STATE/qwen3-asr-1.7b" port pid c smi edit levels csv
  levels="${GB_LEVELS:-1 8 64 128 256}"
  csv="$(echo $levels | tr ' ' ',')"
  edit='{"audio_config":{"d_model":1024,"encoder_layers":24,"encoder_attention_heads":16,"encoder_ffn_dim":4096,
"downsample_hidden_size":480,"output_dim":2048},"text_config":{"hidden_size":2048,"intermediate_size":6144,
"num_hidden_layers":28,"num_attention_heads":16,"num_key_value_heads":8,"head_dim":128}}'
  mkdir -p "$PCACHE/assets/qwen3"
  [ -f "$CARRY/qwen3tok.tar.xz" ] && tar xJf "$CARRY/qwen3tok.tar.xz" -C "$PCACHE/assets/qwen3"
  run_w asr:layout-0.6b "$dir" --gguf --f16 --edit "$edit" >/dev/null || return 1
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  echo "commit ${COMMIT:-unknown}; clip tests/fixtures/audio/jfk.wav (11 s), 40 new tokens a request"
  if [ -n "${GB_PROFILE:-}" ]; then  # one request alone, each node timed (PARLANCE_PROFILE_OPS)
    PARLANCE_PROFILE_OPS=1 run_parlance transcribe --device cuda --model "$dir" --timings --max-new-tokens 40 \
      --min-new-tokens 40 -f text -o /dev/null "$ROOT/tests/fixtures/audio/jfk.wav" >"$STATE/profile.log" 2>&1
    echo "-- op profile, one request:"; grep -E -A30 '^op profile' "$STATE/profile.log"; grep '^timings' "$STATE/profile.log"
  fi
  busy() {  # mean GPU utilisation (%) sampled every 100 ms while the given command runs
    nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 100 >"$STATE/smi.log" 2>/dev/null &
    smi=$!
    "$@"
    kill "$smi" 2>/dev/null; wait "$smi" 2>/dev/null
    awk '{s += $1; n++} END {if (n) printf "gpu busy %.0f %% (%d samples)\n", s / n, n}' "$STATE/smi.log"
  }
  load_levels parlance "$STATE/serve_gb.log" "$levels" "--file $ROOT/tests/fixtures/audio/jfk.wav" \
    --model "$dir" --max-new-tokens 40 --max-queue 4096 ${GB_SERVE_EXTRA:-}
  # GB_MODES: more serve modes (';'-separated flags; "nographs" = CUDA graphs off) at c=64.
  local modes mode
  IFS=';' read -r -a modes <<<"${GB_MODES:-}"
  for mode in "${modes[@]}"; do
    if [[ "$mode" == nographs* ]]; then export GGML_CUDA_DISABLE_GRAPHS=1; mode="${mode#nographs}"; fi
    port=$((18800 + RANDOM % 500))
    spawn_parlance serve --device cuda --port "$port" --model "$dir" --max-new-tokens 40 --max-queue 4096 $mode \
      >"$STATE/serve_gb.log" 2>&1
    pid=$!
    for _ in $(seq 1 240); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.5; done
    echo "parlance ${GGML_CUDA_DISABLE_GRAPHS:+(CUDA graphs off) }$mode c=64: $(busy python3 "$ROOT/bench/load_gen.py" \
      --url "http://127.0.0.1:$port" --file "$ROOT/tests/fixtures/audio/jfk.wav" --concurrency 64 --requests $((${GB_ROUNDS:-2} * 64)) | tr '\n' ' ')"
    echo "  metrics: $(curl -s "http://127.0.0.1:$port/metrics" | grep -E '^parlance_(decoder_steps_total|decode_tokens_total|encoded_pieces_total|engine_seconds_total|gpu_graphs)' | tr '\n' ' ')"
    kill "$pid"; wait "$pid" 2>/dev/null
    unset GGML_CUDA_DISABLE_GRAPHS
  done
  # GB_LOAD_PROFILE=1: the op profile under load (PARLANCE_PROFILE_OPS, each node synchronised:
  # totals over-count small ops), c=64, the encoder in turn with the steps so the profile's one
  # table does not interleave two streams' nodes. Warm: the profile counts from the server's start.
  if [ -n "${GB_LOAD_PROFILE:-}" ]; then
    port=$((18800 + RANDOM % 500))
    PARLANCE_PROFILE_OPS=1 spawn_parlance serve --device cuda --port "$port" --model "$dir" --max-new-tokens 40 \
      --max-queue 4096 --serial-encoder ${GB_SERVE_EXTRA:-} >"$STATE/serve_profile.log" 2>&1
    pid=$!
    for _ in $(seq 1 240); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.5; done
    echo "-- op profile under load (c=64, 256 requests, --serial-encoder): $(python3 "$ROOT/bench/load_gen.py" \
      --url "http://127.0.0.1:$port" --file "$ROOT/tests/fixtures/audio/jfk.wav" --concurrency 64 --requests 256)"
    echo "  metrics: $(curl -s "http://127.0.0.1:$port/metrics" | grep -E '^parlance_(decoder_steps_total|encoded_pieces_total|engine_seconds_total)' | tr '\n' ' ')"
    kill "$pid"; wait "$pid" 2>/dev/null
    grep -E -A45 '^op profile' "$STATE/serve_profile.log"
  fi
  # transformers on the same layout (its HF config: the 0.6B fixture's with the same edit).
  echo "-- transformers generate (bf16, sdpa)"
  [ "${GB_TRANSFORMERS:-1}" != 0 ] && busy python3 "$ROOT/bench/anchor/transformers_qwen3_asr.py" --config "$ROOT/tests/fixtures/qwen3_asr/layout-0.6b/config.json" \
    --edit "$edit" --wav "$ROOT/tests/fixtures/audio/jfk.wav" --batches "$csv" --new-tokens 40 2>&1 | grep -E '^\{|Error|error' | tail -12
  # llama.cpp on the pair's text GGUF: the prompt parlance's requests have (the transcript's
  # prompt tokens: 158 for the 11 s clip, as `transcribe --timings` counts them) and 40 generated tokens.
  if [ -x "$STATE/llama-tools/bin/llama-batched-bench" ]; then
    echo "-- llama-batched-bench (flash attention on)"
    busy "$STATE/llama-tools/bin/llama-batched-bench" -m "$dir/model.gguf" -ngl 99 -fa on -c 80000 -b 2048 -ub 512 \
      -npp "${GB_PROMPT:-158}" -ntg 40 -npl "$csv" 2>&1 | grep -E '^\|' | tail -8
  else
    echo "-- llama-batched-bench: not built (see llama_tools.log)"
  fi
  [ -n "${GB_CHAT:-}" ] && gpu_bench_chat
  [ -n "${GB_WHISPER:-}" ] && gpu_bench_whisper
  [ -n "${GB_LIVE:-}" ] && gpu_bench_live
  return 0
}

# GB_LIVE=1: live sessions on the Qwen3-ASR 0.6B layout (random weights, f16 GGUF pair): at each of
# GB_LIVE_LEVELS ("64 256") that many /v1/realtime sessions stream the bundled model's 51 s sample
# at real time with server_vad (Silero VAD v5, carried as .device/cuda/silero_vad_v5.onnx), each
# re-decode capped at 40 tokens; bench/realtime_load.py reports end of speech -> completed p50/p95
# (the issue's target: p95 <= 300 ms at >= 200 sessions) and the first delta's latency.
gpu_bench_live() {
  local ldir="$STATE/qwen3-asr-0.6b" vad="$CARRY/silero_vad_v5.onnx" port pid
  [ -f "$vad" ] || { echo "-- live sessions: no VAD carried ($vad; run --prepare)"; return 1; }
  python3 -c "import aiohttp" 2>/dev/null || { echo "-- live sessions: python3 has no aiohttp"; return 1; }
  run_w asr:layout-0.6b "$ldir" --gguf --f16 --edit "$ASR_06B_EDIT" >/dev/null || { echo "live layout: not written"; return 1; }
  port=$((18800 + RANDOM % 500))
  spawn_parlance serve --device cuda --port "$port" --model "$ldir" --vad-model "$vad" --max-new-tokens 40 \
    --max-sessions 1024 --max-queue 4096 ${GB_SERVE_EXTRA:-} >"$STATE/serve_live.log" 2>&1
  pid=$!
  for _ in $(seq 1 240); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.5; done
  echo "-- live sessions (Qwen3-ASR 0.6B layout, models/parlance-synth-en/samples/long.wav, 51 s at real time)"
  busy python3 "$ROOT/bench/realtime_load.py" --url "http://127.0.0.1:$port" \
    --file "$ROOT/models/parlance-synth-en/samples/long.wav" --sessions ${GB_LIVE_LEVELS:-64 256} 2>&1 | tail -8
  echo "  metrics: $(curl -s "http://127.0.0.1:$port/metrics" | grep -E '^parlance_(decoder_steps_total|decode_tokens_total|encoded_pieces_total|engine_seconds_total|realtime)' | tr '\n' ' ')"
  kill "$pid"; wait "$pid" 2>/dev/null
  grep -E "error|refus" "$STATE/serve_live.log" | head -5
}

# GB_CHAT=1: the Qwen3-1.7B layout (random weights, f16 GGUF) as the chat model, chat completions
# of a ~150-token prompt and exactly 40 generated tokens (min_tokens = max_tokens) at
# GB_CHAT_LEVELS parallel requests: the shape llama-batched-bench measures above (-npp 158 -ntg 40),
# as generated tokens per second.
gpu_bench_chat() {
  local cdir="$STATE/qwen3-1.7b"
  run_w layout-0.6b "$cdir" --gguf --f16 --edit '{"hidden_size":2048,"intermediate_size":6144,"num_hidden_layers":28,
"num_attention_heads":16,"num_key_value_heads":8,"head_dim":128}' >/dev/null || { echo "chat layout: not written"; return 1; }
  load_levels "parlance chat" "$STATE/serve_chat.log" "${GB_CHAT_LEVELS:-1 64 256}" \
    "--chat --model qwen3-1.7b --max-tokens 40 --prompt-words 120" \
    --model "$ROOT/tests/fixtures/whisper/tiny-en/model" --chat-model "$cdir/model.gguf" --chat-model-id qwen3-1.7b \
    --chat-kv-cache-mb 16384 --chat-kv-cache-type f16 --chat-max-queue 4096 ${GB_SERVE_EXTRA:-}
}

# GB_WHISPER=1: Whisper large-v3-turbo's layout (random weights, f16, written by
# bench/anchor/transformers_whisper.py), a 29.5 s clip (one window) and exactly 100 tokens a
# request (serve --min-new-tokens) at GB_WHISPER_LEVELS, then transformers `generate` on the same
# layout and clip: the issue's target is 1,000 audio-s/s at concurrency 64.
gpu_bench_whisper() {
  local wdir="$STATE/whisper-turbo" wfx="$ROOT/tests/fixtures/whisper/v3-layout/model" levels
  local wedit='{"d_model":1280,"encoder_layers":32,"decoder_layers":4,"encoder_attention_heads":20,
"decoder_attention_heads":20,"encoder_ffn_dim":5120,"decoder_ffn_dim":5120,"init_std":0.02}'
  levels="${GB_WHISPER_LEVELS:-1 64}"
  python3 - "$ROOT/tests/fixtures/audio/jfk.wav" "$STATE/clip30.wav" <<'PY' || return 1
import sys, wave
r = wave.open(sys.argv[1]); pcm = r.readframes(r.getnframes())
want = 16000 * 295 // 10 * 2  # 29.5 s of 16-bit samples: one 30 s window
w = wave.open(sys.argv[2], "wb"); w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000)
w.writeframes((pcm * (want // len(pcm) + 1))[:want]); w.close()
PY
  python3 "$ROOT/bench/anchor/transformers_whisper.py" --config "$wfx/config.json" \
    --generation-config "$wfx/generation_config.json" --edit "$wedit" --write "$wdir" 2>&1 | tail -2
  [ -f "$wdir/model.safetensors" ] || { echo "whisper layout: not written"; return 1; }
  load_levels "parlance whisper" "$STATE/serve_whisper.log" "$levels" "--file $STATE/clip30.wav" \
    --model "$wdir" --max-new-tokens 100 --min-new-tokens 100 --max-queue 4096 ${GB_SERVE_EXTRA:-}
  echo "-- transformers whisper generate (bf16, sdpa)"
  [ "${GB_TRANSFORMERS:-1}" != 0 ] && busy python3 "$ROOT/bench/anchor/transformers_whisper.py" \
    --config "$wfx/config.json" --generation-config "$wfx/generation_config.json" --edit "$wedit" \
    --wav "$STATE/clip30.wav" --batches "$(echo $levels | tr ' ' ',')" --new-tokens 100 2>&1 |
    grep -E '^\{|Error|error' | tail -6
}

environment() {
  uname -a; cat /etc/os-release 2>/dev/null | head -3; ldd --version | head -1; nproc
  command -v nvidia-smi >/dev/null && nvidia-smi
  command -v nvcc >/dev/null && nvcc --version | tail -2
  cmake --version | head -1; ninja --version; c++ --version | head -1
  command -v pkg-config || echo "no pkg-config on the machine"
  command -v dpkg || echo "no dpkg on the machine"
}

if [ "$ACTION" = stages ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
  PKGCFG="$SYSROOT/usr/lib/$ARCH_LIB/pkgconfig:$SYSROOT/usr/share/pkgconfig"
  if [ "$MODE" = cuda ]; then
    PCACHE="$STATE/cache"; GGML_PREFIX="$PCACHE/ggml-0.23.0-cuda"
  else
    PCACHE="${PARLANCE_CACHE:-$HOME/.cache/parlance}"
  fi
  fail() { echo "FAILED at $1" >>"$STATE/summary.txt"; touch "$STATE/done"; exit 1; }
  fx="$ROOT/tests/fixtures/whisper/tiny-en"
  stage env environment
  stage sysroot unpack_sysroot || fail sysroot
  if [ "$MODE" = cuda ]; then
    if [ ! -f "$GGML_PREFIX/.parlance-ok" ]; then stage ggml_cuda build_ggml_cuda || fail ggml_cuda; fi
    stage llama_common build_llama_common || fail llama_common
  fi
  stage parlance_build build_parlance || fail parlance_build
  if [ "$ONLY" = gpu_bench ]; then
    # GB_PARITY=1: first every fixture's parity on cuda in both modes (the throughput stage's first part).
    [ -n "${GB_PARITY:-}" ] && TP_PARITY_ONLY=1 stage throughput throughput
    # GB_LLAMA=0: no llama.cpp anchor (its tools take a minute to build; a short call).
    [ "${GB_LLAMA:-1}" != 0 ] && stage llama_tools build_llama_tools
    stage gpu_bench gpu_bench
    echo "all steps ran" >>"$STATE/summary.txt"
    touch "$STATE/done"
    exit 0
  fi
  if [ "$ONLY" = throughput ]; then
    stage throughput throughput
    echo "all steps ran" >>"$STATE/summary.txt"
    touch "$STATE/done"
    exit 0
  fi
  if [ "$ONLY" = serve_bench ]; then
    stage whisper_anchor build_whisper_anchor || fail whisper_anchor
    stage serve_bench serve_bench_device
    echo "all steps ran" >>"$STATE/summary.txt"
    touch "$STATE/done"
    exit 0
  fi
  stage info run_parlance info "$fx/model"
  # Every Whisper reference (each folder of tests/fixtures/whisper with a reference.json), on the
  # accelerator and on the CPU, with the same binary.
  for ref in "$ROOT"/tests/fixtures/whisper/*/; do
    ref="${ref%/}"  # parity looks for clips in the reference's parent: no trailing slash
    [ -f "$ref/reference.json" ] || continue
    name="$(basename "$ref")"
    [ "$MODE" = cuda ] && stage "parity_cuda_$name" run_parlance parity "$ref" --device cuda
    stage "parity_cpu_$name" run_parlance parity "$ref" --device cpu
  done
  # Every Qwen3 reference: its checkpoint written by the tests' generator (HF bf16, and llama.cpp's
  # GGUF layout for tiny), then the same comparison.
  mkdir -p "$PCACHE/assets/qwen3"
  [ -f "$CARRY/qwen3tok.tar.xz" ] && tar xJf "$CARRY/qwen3tok.tar.xz" -C "$PCACHE/assets/qwen3"
  for ref in "$ROOT"/tests/fixtures/qwen3/*/; do
    ref="${ref%/}"
    name="$(basename "$ref")"
    stage "write_$name" run_w "$name" "$STATE/qwen3-$name" || continue
    [ "$MODE" = cuda ] && stage "parity_cuda_qwen3_$name" run_parlance parity "$ref" --model "$STATE/qwen3-$name" --device cuda
    stage "parity_cpu_qwen3_$name" run_parlance parity "$ref" --model "$STATE/qwen3-$name" --device cpu
  done
  # Every Qwen3-ASR reference: its checkpoint from the same generator, its clips from tests/fixtures/audio.
  for ref in "$ROOT"/tests/fixtures/qwen3_asr/*/; do
    ref="${ref%/}"
    name="$(basename "$ref")"
    stage "write_asr_$name" run_w "asr:$name" "$STATE/qwen3-asr-$name" || continue
    [ "$MODE" = cuda ] && stage "parity_cuda_qwen3_asr_$name" run_parlance parity "$ref" --model "$STATE/qwen3-asr-$name" --device cuda
    stage "parity_cpu_qwen3_asr_$name" run_parlance parity "$ref" --model "$STATE/qwen3-asr-$name" --device cpu
  done
  if [ "$MODE" = cuda ]; then
    stage parity_devices_compact devices_agree "$ROOT/tests/fixtures/whisper/compact/model"
    stage parity_devices_default devices_agree "$ROOT/models/parlance-synth-en"
  fi
  if [ "$MODE" = cuda ] && [ -d "$STATE/qwen3-asr-layout-0.6b" ]; then
    stage op_trace_short op_trace "$STATE/qwen3-asr-layout-0.6b" 16000 4800
  fi
  if [ "$MODE" = cuda ]; then  # what TF32 (ggml-cuda's default) does to the same checks
    NVIDIA_TF32_OVERRIDE=1 stage parity_cuda_tf32_tiny-en run_parlance parity "$ROOT/tests/fixtures/whisper/tiny-en" --device cuda
  fi
  if stage write_gguf run_w tiny "$STATE/qwen3-gguf" --gguf; then
    [ "$MODE" = cuda ] && stage parity_cuda_qwen3_gguf run_parlance parity "$ROOT/tests/fixtures/qwen3/tiny" --model "$STATE/qwen3-gguf/model.gguf" --device cuda
    stage parity_cpu_qwen3_gguf run_parlance parity "$ROOT/tests/fixtures/qwen3/tiny" --model "$STATE/qwen3-gguf/model.gguf" --device cpu
  fi
  # llama.cpp's GGUF pair of the Qwen3-ASR layout (the tests' writer, byte for byte what the
  # bundle's converter writes), on both devices.
  if stage write_asr_gguf run_w asr:layout-0.6b "$STATE/qwen3-asr-gguf" --gguf; then
    [ "$MODE" = cuda ] && stage parity_cuda_qwen3_asr_gguf run_parlance parity "$ROOT/tests/fixtures/qwen3_asr/layout-0.6b" --model "$STATE/qwen3-asr-gguf" --device cuda
    stage parity_cpu_qwen3_asr_gguf run_parlance parity "$ROOT/tests/fixtures/qwen3_asr/layout-0.6b" --model "$STATE/qwen3-asr-gguf" --device cpu
  fi
  for kind in whisper qwen3_asr chat; do
    # Bit-identical alone and batched is --deterministic's promise on a GPU (the default
    # throughput step's kernels follow the batch's width).
    [ "$MODE" = cuda ] && SERVE_EXTRA=--deterministic stage "parity_cuda_serve_$kind" serve_invariance cuda "$kind"
    stage "parity_cpu_serve_$kind" serve_invariance cpu "$kind"
  done
  [ "$MODE" = cuda ] && stage accumulation_cost accumulation_cost
  # One line per parity run: what passed.
  for f in "$STATE"/parity_*.log; do
    printf '%-28s %s\n' "$(basename "$f" .log)" "$(grep -E 'checks identical' "$f" | tr '\n' ' ')" >>"$STATE/summary.txt"
  done
  echo "all steps ran" >>"$STATE/summary.txt"
  touch "$STATE/done"
  exit 0
fi

# ---------------------------------------------------------------- run: start or rejoin, wait, collect
mkdir -p "$STATE" "$OUT"
if [ -f "$STATE/done" ]; then  # a finished earlier run on this machine: run again (ggml is kept)
  rm -rf "$STATE/started" "$STATE/done" "$STATE/build" "$STATE"/*.log
fi
if [ ! -f "$STATE/started" ]; then
  for need in "$CARRY/ggml-src.tar.xz" "$CARRY/llama-common-src.tar.xz"; do
    [ -e "$need" ] || [ "$MODE" = cpu ] || { echo "missing $need (run --prepare and carry .device)" >&2; exit 2; }
  done
  touch "$STATE/started"; : >"$STATE/summary.txt"
  extra=(); [ "$MODE" = cpu ] && extra=(--cpu)
  ONLY="$ONLY" setsid nohup bash "$0" --stages "${extra[@]}" >"$STATE/stages.out" 2>&1 </dev/null &
fi
t0=$SECONDS
while [ ! -f "$STATE/done" ] && [ $((SECONDS - t0)) -lt "$WAIT_S" ]; do sleep 5; done
collect() {
  { echo "commit ${COMMIT:-unknown} $(date -u +%FT%TZ)"; cat "$STATE/summary.txt"; } >"$OUT/summary.txt"
  # Eight files come back at most: sysroot.log (the unpacked tree) stays on the machine.
  for f in env ggml_cuda parlance_build; do
    [ -f "$STATE/$f.log" ] && cp "$STATE/$f.log" "$OUT/$f.log"
  done
  [ -f "$STATE/llama_common.log" ] && cat "$STATE/llama_common.log" >>"$OUT/parlance_build.log"
  # The parity tables in one file (the device returns at most 8 files).
  cat "$STATE"/info.log "$STATE"/parity_*.log >"$OUT/parity.log" 2>/dev/null || true
  [ -f "$STATE/op_trace_short.log" ] && cp "$STATE/op_trace_short.log" "$OUT/op_trace.log"
  [ -f "$STATE/accumulation_cost.log" ] && cp "$STATE/accumulation_cost.log" "$OUT/accumulation_cost.log"
  [ -f "$STATE/throughput.log" ] && cp "$STATE/throughput.log" "$OUT/throughput.log"
  [ -f "$STATE/gpu_bench.log" ] && cp "$STATE/gpu_bench.log" "$OUT/gpu_bench.log"
  [ -f "$STATE/llama_tools.log" ] && tail -40 "$STATE/llama_tools.log" >"$OUT/llama_tools.log"
  if [ -f "$STATE/whisper_anchor.log" ]; then
    { cat "$STATE/serve_bench.log" 2>/dev/null; echo "-- anchor build"; tail -30 "$STATE/whisper_anchor.log";
      echo "-- server log"; tail -30 "$ROOT/bench/build/serve.log" 2>/dev/null;
      echo "-- whisper.cpp log"; tail -30 "$ROOT/bench/build/serial.log" 2>/dev/null; } >"$OUT/serve_bench.log"
  fi
  [ -f "$STATE/stages.out" ] && cat "$STATE/stages.out" >>"$OUT/summary.txt"
}
cat "$STATE/summary.txt"
if [ ! -f "$STATE/done" ]; then
  echo "still running after ${WAIT_S}s; last lines of the current step:"
  tail -3 "$(ls -t "$STATE"/*.log 2>/dev/null | head -1)" 2>/dev/null
  collect; exit 3
fi
collect
grep -q FAILED "$STATE/summary.txt" && exit 1
exit 0
