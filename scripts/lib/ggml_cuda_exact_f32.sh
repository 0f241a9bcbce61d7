#!/usr/bin/env bash
# Patches a ggml source tree (its ggml/ folder) so that ggml-cuda never multiplies f32 weights on
# its tensor-core "mmf" kernel, which computes in TF32 (10-bit mantissa) whatever the requested
# precision: such products (5-16 columns: a decoder's prompt steps) then take the cuBLAS path,
# which parlance runs in exact f32 (NVIDIA_TF32_OVERRIDE=0, src/core/backend.cpp). f16, bf16 and
# quantized weights are unaffected. Idempotent; fails if the code it expects is not there.
# Usage: scripts/lib/ggml_cuda_exact_f32.sh GGML_DIR
set -euo pipefail
f="$1/src/ggml-cuda/mmf.cu"
marker="parlance: exact f32"
grep -q "$marker" "$f" && exit 0
# ggml_cuda_should_use_mmf's answer for GGML_TYPE_F32 (the only line of this text in the file).
old='return ampere_mma_available(cc) || amd_mfma_available(cc);'
[ "$(grep -cF "$old" "$f")" = 1 ] || { echo "ggml_cuda_exact_f32.sh: $f changed; update the patch" >&2; exit 1; }
sed -i "s/return ampere_mma_available(cc) || amd_mfma_available(cc);/return false;  \/\/ $marker (was: ampere_mma_available(cc) || amd_mfma_available(cc))/" "$f"
grep -q "$marker" "$f"
