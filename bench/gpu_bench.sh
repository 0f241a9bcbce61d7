#!/usr/bin/env bash
# The GPU benchmark (issue 51), end to end on the GPU machine: builds ggml-cuda, parlance and
# llama.cpp's tools from the pinned bundle, writes the Qwen3-ASR 1.7B layout (random weights, f16
# GGUF pair), serves it with `parlance serve --device cuda` under bench/load_gen.py at concurrency
# 1, 8, 64, 128 and 256 (GB_LEVELS), then runs the anchors on the same GPU in the same run:
# transformers `generate` (bench/anchor/transformers_qwen3_asr.py) and llama-batched-bench on the
# pair's text GGUF. GPU busy percentage is sampled during each. Results: $OUT/gpu_bench.log.
#
# It is scripts/device_cuda_check.sh's --gpu-bench stage (the same detached build, WAIT_S and
# collection): prepare the carry here with `scripts/device_cuda_check.sh --prepare`, then on the
# GPU machine (docs/cuda.md gives the device call; carry the five .device/cuda/*.tar.xz files):
#   COMMIT=<sha> WAIT_S=570 bash bench/gpu_bench.sh     # exits 3 while still running: call again
# GB_SERVE_EXTRA adds serve flags; GB_PROMPT sets llama-batched-bench's prompt length (158);
# GB_PARITY=1 first checks every fixture's parity on cuda in both modes (throughput.log);
# GB_LEVELS the concurrencies ("1 8 64 128 256"); GB_LLAMA=0 leaves llama.cpp's anchor out.
# GB_MODES: more serve modes at c=64 (';'-separated flags: "--prompt-gather-steps 8;--serial-encoder");
# GB_LOAD_PROFILE=1 adds an op profile of the server under load (c=64, --serial-encoder);
# GB_TRANSFORMERS=0 leaves the transformers anchor out (a short call).
# GB_CHAT=1 adds the Qwen3-1.7B layout as a chat model at GB_CHAT_LEVELS ("1 64 256"), 40 tokens a
# request; GB_WHISPER=1 Whisper large-v3-turbo's layout at GB_WHISPER_LEVELS ("1 64"), 100 tokens a
# 30 s window, with transformers on the same layout. GB_LIVE=1 live sessions on the Qwen3-ASR 0.6B
# layout at GB_LIVE_LEVELS ("64 256") with bench/realtime_load.py (carry .device/cuda/silero_vad_v5.onnx too).
# GB_ROUNDS: requests per client at each level (2: 2c requests). A short load is mostly its ramp
# (every client's first upload encoded before its decode starts) and its tail; 8 or more measures
# the steady state the static-batch anchors are compared with.
set -uo pipefail
exec bash "$(cd "$(dirname "$0")/.." && pwd)/scripts/device_cuda_check.sh" --gpu-bench "$@"
