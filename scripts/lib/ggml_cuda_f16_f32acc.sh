#!/usr/bin/env bash
# Patches a ggml source tree (its ggml/ folder) so that a product of f16 weights asked at f32
# precision (GGML_PREC_F32, what parlance's products ask) runs on tensor cores: the f32 columns
# converted to f16, one cublasGemmEx with f16 inputs and f32 accumulation into the f32 result
# (transformers' bf16 numerics, with a 10-bit mantissa instead of 7). Unpatched, ggml-cuda converts
# both operands to f32 and calls SGEMM, which parlance runs without TF32 (exact f32): ~41 TFLOP/s
# on an H100 for a 2,371-token prompt step (BENCHMARKS.md, session 37). Products ggml's own f16
# kernels take (a few columns: decode steps, --deterministic's one-column products) never reach
# cuBLAS and are unaffected, as are f32 and quantized weights and anything but a 2-D contiguous
# weight times contiguous columns. Idempotent; fails if the code it expects is not there.
# Usage: scripts/lib/ggml_cuda_f16_f32acc.sh GGML_DIR
set -euo pipefail
f="$1/src/ggml-cuda/ggml-cuda.cu"
marker="parlance: f16 x f16 -> f32"
grep -q "$marker" "$f" && exit 0
head='static void ggml_cuda_mul_mat_cublas(ggml_backend_cuda_context & ctx, const ggml_tensor * src0, const ggml_tensor * src1, ggml_tensor * dst) {'
prec='    if (dst->op_params[0] == GGML_PREC_F32) {'
[ "$(grep -cF "$head" "$f")" = 1 ] || { echo "ggml_cuda_f16_f32acc.sh: $f changed (mul_mat_cublas); update the patch" >&2; exit 1; }
[ "$(grep -cF "$prec" "$f")" = 1 ] || { echo "ggml_cuda_f16_f32acc.sh: $f changed (GGML_PREC_F32); update the patch" >&2; exit 1; }
helper=$(cat <<'EOF'
// parlance: f16 x f16 -> f32 (scripts/lib/ggml_cuda_f16_f32acc.sh). A 2-D f16 weight times
// contiguous f32 columns at f32 precision: the columns rounded to f16, f32 accumulation. Columns
// already f16 (a convolution's im2col written as f16) are read as they are.
static bool parlance_mul_mat_f16_f32acc(ggml_backend_cuda_context & ctx, const ggml_tensor * src0, const ggml_tensor * src1, ggml_tensor * dst) {
    if (src0->type != GGML_TYPE_F16 || (src1->type != GGML_TYPE_F32 && src1->type != GGML_TYPE_F16) ||
        dst->type != GGML_TYPE_F32 ||
        src0->ne[2] != 1 || src0->ne[3] != 1 || !ggml_is_contiguous(src0) || !ggml_is_contiguous(src1) ||
        !ggml_is_contiguous(dst) || src0->ne[0] != src1->ne[0]) {
        return false;
    }
    const int64_t k = src0->ne[0], m = src0->ne[1], n = ggml_nrows(src1);
    cudaStream_t stream = ctx.stream();
    ggml_cuda_pool_alloc<half> converted(ctx.pool());
    const half * cols = (const half *) src1->data;
    if (src1->type == GGML_TYPE_F32) {
        converted.alloc(k * n);
        ggml_get_to_fp16_cuda(GGML_TYPE_F32)(src1->data, converted.get(), k * n, stream);
        cols = converted.get();
    }
    const float alpha = 1.0f, beta = 0.0f;
    CUBLAS_CHECK(cublasSetStream(ctx.cublas_handle(), stream));
    CUBLAS_CHECK(cublasGemmEx(ctx.cublas_handle(), CUBLAS_OP_T, CUBLAS_OP_N, m, n, k,
                              &alpha, src0->data, CUDA_R_16F, k, cols, CUDA_R_16F, k,
                              &beta, dst->data, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP));
    return true;
}

EOF
)
# The helper before ggml_cuda_mul_mat_cublas; the call at the top of its GGML_PREC_F32 branch.
awk -v head="$head" -v prec="$prec" -v helper="$helper" '
  $0 == head { print helper; print; inside = 1; next }
  inside && $0 == prec { print; print "        if (parlance_mul_mat_f16_f32acc(ctx, src0, src1, dst)) {  // " "parlance: f16 x f16 -> f32"; print "            return;"; print "        }"; inside = 0; next }
  { print }
' "$f" >"$f.parlance" && mv "$f.parlance" "$f"
[ "$(grep -c "$marker" "$f")" = 2 ] || { echo "ggml_cuda_f16_f32acc.sh: the patch did not apply" >&2; exit 1; }
