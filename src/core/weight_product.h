// W·x for a layer's weights: the one product every projection, MLP and output head goes through.
//
// On the CPU, ggml computes an f16 weight product one dot product per (row, column): it rounds the
// activations to f16, then converts both operands again for every column, so a decoder step over
// 8 sequences costs about 6x one sequence although it reads the same weights. For small column
// counts (decode steps, short prompt chunks) this routes the product to a multi-column kernel:
// each weight block is converted once and multiplied into up to four columns, the activations stay
// f32, and every output element is accumulated in the same order whatever the number of columns
// or the tiling — so a sequence's results are identical alone or in a batch (batch invariance).
// f16, f32 and q8_0 weights (q8_0: ggml's own q8_0 product, bit for bit — the activations rounded
// to q8_0 blocks, int8 dot products — with each weight block read once for all columns and several
// rows in flight; ggml reads the weights once per column). Elsewhere (GPU weights, large batches
// that ggml hands to BLAS, other weight types, CPUs without AVX2/F16C) it is ggml_mul_mat — on a
// GPU asked for Products::BatchInvariant with each column as its own one-column matrix, so the
// GPU's vector kernel computes every column the same way.
#pragma once

#include <ggml.h>

#include <cstdint>

namespace parlance {

// Which products a graph asks for, chosen by the code that builds it and passed to every product
// it makes (weight_product, linear, conv1d, swiglu_mlp):
//  - Fast: the multi-column kernel for few columns, ggml's product (BLAS on the CPU, cuBLAS on a
//    GPU) for many, whose summation order follows the shape;
//  - BatchInvariant: a result that does not depend on what else is in the batch — graphs whose
//    results must not, decoder steps (allocated with Backend::alloc_graph(graph,
//    /*batch_invariant=*/true)) and the CPU encoders whose weights the kernel takes: on the CPU the
//    kernel however many columns; on a GPU under --deterministic (device_products_invariant())
//    each column as its own one-column product; otherwise as Fast.
enum class Products { Fast, BatchInvariant };

// ggml_mul_mat(w, x), same shapes: w ne [in, out] (f16, f32 or any ggml type), x [in, n, ...] f32
// -> [out, n, ...] f32; or batched, w [in, out, m] (views allowed: rows need only be contiguous
// within themselves) times x [in, n, m] -> [out, n, m], as attention's per-head products.
// On a GPU the product accumulates in f32 (as f32_product); the CPU kernel always does.
ggml_tensor* weight_product(ggml_context* ctx, Products products, ggml_tensor* w, ggml_tensor* x);

// ggml_mul_mat(a, b) computed by a GPU with f32 accumulation: ggml-cuda's default for f16 or bf16
// operands is f16 operands and f16 accumulation through cuBLAS (an f16 convolution kernel made the
// Qwen3-ASR encoder 1e-3 off, issue 19). Every product of ours is this or weight_product(). It
// costs nothing measurable on an H200 and ggml's default made the 0.6B encoder 2.2x slower
// (docs/cuda.md); PARLANCE_GPU_ACCUMULATION=default restores ggml's default to measure that again.
// CPU results never change: ggml's CPU kernels accumulate in f32 whatever the setting.
ggml_tensor* f32_product(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b);

// The kernel itself, for tests: y[c*y_stride + r] = sum_k w[r*row_bytes + k] * x[c*x_stride + k]
// for rows [row_begin, row_end) and columns [0, n_cols). w_type is GGML_TYPE_F16, GGML_TYPE_F32 or
// GGML_TYPE_Q8_0 (llama.cpp's blocks of 32, `in` a multiple of 32: x rounded to q8_0 as ggml
// rounds it, and each output ggml's AVX2 q8_0 dot product, bit for bit, on every x86 CPU).
// Returns false when this CPU has no vector path (the caller falls back to ggml).
bool weight_product_rows(ggml_type w_type, const void* w, size_t row_bytes, int64_t in, const float* x,
                         int64_t x_stride, int64_t n_cols, float* y, int64_t y_stride, int64_t row_begin,
                         int64_t row_end);

// Whether weight_product() uses the multi-column kernel on this machine (AVX2+F16C+FMA or
// AVX-512F).
bool weight_product_kernel_available();

// Whether weight_product() multiplies `w` with the multi-column kernel for Products::
// BatchInvariant: f16 or f32 weights in CPU memory, on a CPU with the kernel. An encoder whose
// weights pass asks for BatchInvariant products (quantized weights keep ggml's products, whose
// BLAS path is faster for a whole window; devices their own). Decoder steps take the kernel for
// q8_0 weights too.
bool kernel_takes_weights(const ggml_tensor* w);

// Products::Fast products of this many columns or more go to ggml_mul_mat: ggml's CPU backend
// hands them to BLAS (faster for encoder windows), whose summation order depends on the shape.
inline constexpr int64_t kWeightProductMaxColumns = 32;

}  // namespace parlance
