// The CPU kernels behind every decoder step: the multi-column weight product and the in-place
// paged attention. Each must equal a float64 reference to f32 accuracy, and each output must be
// bit-identical whatever else shares the call (batch invariance: the engine's guarantee).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <tuple>
#include <vector>

#include <ggml-backend.h>
#include <ggml-cpu.h>
#include <ggml.h>

#include "core/backend.h"
#include "core/cpu_attention.h"
#include "core/cpu_attention_kernel.h"
#include "core/cpu_features.h"
#include "core/graph_ops.h"
#include "core/step_batch.h"
#include "core/weight_product.h"
#include "core_test_util.h"

namespace parlance {
namespace {

std::vector<ggml_fp16_t> to_f16(const std::vector<float>& v) {
    std::vector<ggml_fp16_t> h(v.size());
    ggml_fp32_to_fp16_row(v.data(), h.data(), static_cast<int64_t>(v.size()));
    return h;
}

std::vector<float> from_f16(const std::vector<ggml_fp16_t>& h) {
    std::vector<float> v(h.size());
    ggml_fp16_to_fp32_row(h.data(), v.data(), static_cast<int64_t>(h.size()));
    return v;
}

// Relative error max|a - b| / max|b|.
double rel_error(const std::vector<float>& a, const std::vector<double>& b) {
    double d = 0, m = 0;
    for (size_t i = 0; i < b.size(); ++i) {
        d = std::max(d, std::abs(a[i] - b[i]));
        m = std::max(m, std::abs(b[i]));
    }
    return d / m;
}

// Every column of `batch` (the product of all `cols` columns at once) is the same bits computed
// alone over uneven row pieces, and in batches of 2-5 columns.
void expect_columns_independent(ggml_type type, const void* w, size_t row_bytes, int64_t in,
                                const std::vector<float>& x, int64_t rows, int64_t cols,
                                const std::vector<float>& batch) {
    for (const int64_t n : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}, int64_t{5}}) {
        for (int64_t c0 = 0; c0 + n <= cols; c0 += n) {
            std::vector<float> part(static_cast<size_t>(rows * n));
            for (int64_t r0 = 0; r0 < rows;) {
                const int64_t r1 = std::min(rows, r0 + 1 + r0 % 7);
                ASSERT_TRUE(
                    weight_product_rows(type, w, row_bytes, in, x.data() + c0 * in, in, n, part.data(), rows, r0, r1));
                r0 = r1;
            }
            EXPECT_EQ(0, std::memcmp(part.data(), batch.data() + c0 * rows, part.size() * sizeof(float)))
                << n << " columns from " << c0;
        }
    }
}

class WeightProductKernel : public ::testing::TestWithParam<ggml_type> {};

// Odd sizes on purpose: rows not a multiple of any tile, `in` not a multiple of any vector width.
TEST_P(WeightProductKernel, EqualsFloat64AndEveryColumnIsTheSameAloneOrInABatch) {
    if (!weight_product_kernel_available()) GTEST_SKIP() << "no AVX2/AVX-512 on this CPU";
    const ggml_type type = GetParam();
    const int64_t rows = 53, in = 77, cols = 13;
    std::vector<float> wf = testing::ramp(static_cast<size_t>(rows * in), 3);
    const std::vector<ggml_fp16_t> wh = to_f16(wf);
    if (type == GGML_TYPE_F16) wf = from_f16(wh);  // the values the kernel multiplies
    const void* w = type == GGML_TYPE_F16 ? static_cast<const void*>(wh.data()) : wf.data();
    const size_t row_bytes = static_cast<size_t>(in) * ggml_type_size(type);
    const std::vector<float> x = testing::ramp(static_cast<size_t>(in * cols), 4);

    std::vector<float> batch(static_cast<size_t>(rows * cols));
    ASSERT_TRUE(weight_product_rows(type, w, row_bytes, in, x.data(), in, cols, batch.data(), rows, 0, rows));
    std::vector<double> ref(batch.size());
    for (int64_t c = 0; c < cols; ++c)
        for (int64_t r = 0; r < rows; ++r) {
            double s = 0;
            for (int64_t k = 0; k < in; ++k) s += static_cast<double>(wf[r * in + k]) * x[c * in + k];
            ref[c * rows + r] = s;
        }
    EXPECT_LT(rel_error(batch, ref), 1e-6);
    expect_columns_independent(type, w, row_bytes, in, x, rows, cols, batch);
}

INSTANTIATE_TEST_SUITE_P(Types, WeightProductKernel, ::testing::Values(GGML_TYPE_F16, GGML_TYPE_F32),
                         [](const auto& info) { return std::string(ggml_type_name(info.param)); });

// ggml's q8_0 dot product on AVX2, written out: the activations rounded to q8_0 blocks
// (quantize_row_q8_0: d = max|x| / 127 kept as f16, values round-half-even(x * 127 / max|x|)); per
// block, lane i of 8 holds the exact int32 sum of products 4i..4i+3 and adds it into f32 lane i
// times d_w * d_x with one fused multiply-add; the lanes summed (j + j+4, + j+2, + j+1).
float ggml_q8_0_dot(const uint8_t* w_row, const float* x, int64_t in) {
    float lanes[8] = {};
    for (int64_t b = 0; b < in / 32; ++b) {
        const float* xb = x + b * 32;
        float amax = 0;
        for (int k = 0; k < 32; ++k) amax = std::max(amax, std::abs(xb[k]));
        const float dx = ggml_fp16_to_fp32(ggml_fp32_to_fp16(amax / 127.f));
        const float id = amax != 0 ? 127.f / amax : 0.f;
        ggml_fp16_t dw_h;
        std::memcpy(&dw_h, w_row + b * 34, sizeof dw_h);
        const float d = ggml_fp16_to_fp32(dw_h) * dx;
        const auto* qw = reinterpret_cast<const int8_t*>(w_row + b * 34 + 2);
        for (int l = 0; l < 8; ++l) {
            int32_t sum = 0;
            for (int k = 4 * l; k < 4 * l + 4; ++k) sum += qw[k] * static_cast<int32_t>(std::nearbyint(xb[k] * id));
            lanes[l] = std::fma(d, static_cast<float>(sum), lanes[l]);
        }
    }
    float t[4];
    for (int j = 0; j < 4; ++j) t[j] = lanes[j] + lanes[j + 4];
    return (t[0] + t[2]) + (t[1] + t[3]);
}

// llama.cpp's q8_0 blocks (ggml's own quantizer) times f32 activations: exactly ggml's q8_0 product
// — the written-out sum above, bit for bit, and ggml's own CPU dot product (bit for bit where ggml
// was built for AVX2, as setup.sh builds it on such a CPU) — and every column the same bits alone,
// in batches of any size and over uneven row pieces, so q8_0 decoder steps keep batch invariance.
// Activations of mixed magnitudes, a block of zeros and a constant block test the rounding's edges.
TEST(WeightProduct, Q8_0IsGgmlsQ8_0ProductAndEveryColumnIsTheSameAloneOrInABatch) {
    if (!weight_product_kernel_available()) GTEST_SKIP() << "no AVX2/AVX-512 on this CPU";
    const int64_t rows = 53, in = 128, cols = 13;
    const std::vector<float> wf = testing::ramp(static_cast<size_t>(rows * in), 5);
    const size_t row_bytes = ggml_row_size(GGML_TYPE_Q8_0, in);
    std::vector<uint8_t> q(row_bytes * rows);
    ggml_quantize_chunk(GGML_TYPE_Q8_0, wf.data(), q.data(), 0, rows, in, nullptr);
    std::vector<float> x = testing::ramp(static_cast<size_t>(in * cols), 6);
    for (int64_t i = 0; i < in * cols; ++i) x[i] *= 1 + static_cast<float>(i % 37) * 0.5f;
    std::fill(x.begin() + 32, x.begin() + 64, 0.0f);              // column 0, block 1: all zero
    std::fill(x.begin() + in + 64, x.begin() + in + 96, -0.75f);  // column 1, block 2: constant

    std::vector<float> batch(static_cast<size_t>(rows * cols));
    ASSERT_TRUE(
        weight_product_rows(GGML_TYPE_Q8_0, q.data(), row_bytes, in, x.data(), in, cols, batch.data(), rows, 0, rows));
    ggml_cpu_init();  // ggml's f16 tables
    const ggml_type_traits_cpu* cpu = ggml_get_type_traits_cpu(GGML_TYPE_Q8_0);
    std::vector<uint8_t> xq(row_bytes);
    int differ_from_ggml = 0;
    double worst = 0;
    for (int64_t c = 0; c < cols; ++c) {
        cpu->from_float(x.data() + c * in, xq.data(), in);
        for (int64_t r = 0; r < rows; ++r) {
            const float got = batch[c * rows + r];
            ASSERT_EQ(got, ggml_q8_0_dot(q.data() + r * row_bytes, x.data() + c * in, in))
                << "row " << r << " col " << c;
            float ggml_dot = 0;
            cpu->vec_dot(static_cast<int>(in), &ggml_dot, 0, q.data() + r * row_bytes, 0, xq.data(), 0, 1);
            differ_from_ggml += got != ggml_dot;
            worst = std::max(worst, std::abs(double(got) - ggml_dot) / std::max(1e-30, std::abs(double(ggml_dot))));
        }
    }
    if (ggml_cpu_has_avx2())
        EXPECT_EQ(differ_from_ggml, 0);
    else
        EXPECT_LT(worst, 1e-5);
    expect_columns_independent(GGML_TYPE_Q8_0, q.data(), row_bytes, in, x, rows, cols, batch);
}

// A graph on the CPU backend: weights in a backend buffer, `build` makes the output from them.
struct CpuGraph {
    Backend backend;
    ggml_context* weights_ctx = nullptr;
    ggml_backend_buffer_t weights_buf = nullptr;
    std::vector<uint8_t> meta = std::vector<uint8_t>(ggml_tensor_overhead() * 256 + ggml_graph_overhead());

    explicit CpuGraph(int threads = 2) : backend(BackendOptions{"cpu", threads, false, false}) {
        ggml_init_params p{ggml_tensor_overhead() * 16, nullptr, true};
        weights_ctx = ggml_init(p);
    }
    ~CpuGraph() {
        if (weights_buf) ggml_backend_buffer_free(weights_buf);
        ggml_free(weights_ctx);
    }
    void upload_weights(const std::vector<std::pair<ggml_tensor*, const void*>>& data) {
        weights_buf = ggml_backend_alloc_ctx_tensors(weights_ctx, backend.primary());
        for (const auto& [t, d] : data) ggml_backend_tensor_set(t, d, 0, ggml_nbytes(t));
    }
    // Builds with `build`, allocates (batch-invariant when asked), computes, returns the output.
    std::vector<float> run(const std::function<ggml_tensor*(ggml_context*)>& build,
                           const std::function<void()>& set_inputs = {}, bool invariant = true) {
        ggml_init_params p{meta.size(), meta.data(), true};
        ggml_context* ctx = ggml_init(p);
        ggml_cgraph* g = ggml_new_graph(ctx);
        ggml_tensor* out = build(ctx);
        ggml_set_output(out);
        ggml_build_forward_expand(g, out);
        backend.alloc_graph(g, invariant);
        if (set_inputs) set_inputs();
        backend.compute(g);
        std::vector<float> y(static_cast<size_t>(ggml_nelements(out)));
        ggml_backend_tensor_get(out, y.data(), 0, ggml_nbytes(out));
        ggml_free(ctx);
        return y;
    }
};

TEST(WeightProduct, GraphOpMatchesGgmlMulMatForMatricesAndPerHeadViews) {
    if (!weight_product_kernel_available()) GTEST_SKIP() << "no AVX2/AVX-512 on this CPU";
    CpuGraph cg;
    const int64_t in = 64, rows = 40, heads = 3, n = 5;
    // Stored as attention's cross K: [hd, heads, rows], read per head as the view [hd, rows,
    // heads].
    ggml_tensor* w = ggml_new_tensor_3d(cg.weights_ctx, GGML_TYPE_F16, in, heads, rows);
    const std::vector<ggml_fp16_t> wh = to_f16(testing::ramp(static_cast<size_t>(in * heads * rows), 5));
    cg.upload_weights({{w, wh.data()}});
    const std::vector<float> x = testing::ramp(static_cast<size_t>(in * heads * n), 6);
    ggml_tensor* xin = nullptr;
    auto build = [&](bool ours) {
        return [&, ours](ggml_context* ctx) {
            xin = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, in, heads, n);  // [hd, heads, n] as q is
            ggml_set_input(xin);
            ggml_tensor* wv = ggml_permute(ctx, w, 0, 2, 1, 3);    // [hd, rows, heads]
            ggml_tensor* xv = ggml_permute(ctx, xin, 0, 2, 1, 3);  // [hd, n, heads]
            return ours ? weight_product(ctx, Products::BatchInvariant, wv, xv) : ggml_mul_mat(ctx, wv, xv);
        };
    };
    auto set = [&] { ggml_backend_tensor_set(xin, x.data(), 0, x.size() * sizeof(float)); };
    const std::vector<float> ours = cg.run(build(true), set);
    const std::vector<float> theirs = cg.run(build(false), set);
    ASSERT_EQ(ours.size(), static_cast<size_t>(rows * n * heads));
    const std::vector<float> wf = from_f16(wh);
    std::vector<double> ref(ours.size());
    for (int64_t h = 0; h < heads; ++h)
        for (int64_t c = 0; c < n; ++c)
            for (int64_t r = 0; r < rows; ++r) {
                double s = 0;
                for (int64_t k = 0; k < in; ++k)
                    s += static_cast<double>(wf[(r * heads + h) * in + k]) * x[(c * heads + h) * in + k];
                ref[(h * n + c) * rows + r] = s;
            }
    EXPECT_LT(rel_error(ours, ref), 1e-6);
    EXPECT_LT(rel_error(theirs, ref), 2e-3);  // ggml rounds the activations to f16
}

// Attention of tokens over their own cells; returns [hd * heads, n].
std::vector<double> reference_attention(const std::vector<float>& q, const std::vector<float>& k,
                                        const std::vector<float>& v, const std::vector<int32_t>& read,
                                        const std::vector<int32_t>& visible, int64_t hd, int64_t heads,
                                        int64_t kv_heads, float scale) {
    const int64_t n = static_cast<int64_t>(visible.size() / 2), kv_dim = hd * kv_heads;
    std::vector<double> out(static_cast<size_t>(hd * heads * n));
    for (int64_t i = 0; i < n; ++i)
        for (int64_t h = 0; h < heads; ++h) {
            const int64_t kvh = h / (heads / kv_heads);
            const float* qi = q.data() + (i * heads + h) * hd;
            std::vector<double> s;
            double m = -INFINITY;
            for (int32_t j = 0; j < visible[2 * i + 1]; ++j) {
                const int32_t cell = read[visible[2 * i] + j];
                double d = 0;
                for (int64_t e = 0; e < hd; ++e) d += static_cast<double>(qi[e]) * k[cell * kv_dim + kvh * hd + e];
                s.push_back(d * scale);
                m = std::max(m, s.back());
            }
            double sum = 0;
            for (double& x : s) sum += (x = std::exp(x - m));
            for (size_t j = 0; j < s.size(); ++j) {
                const int32_t cell = read[visible[2 * i] + static_cast<int32_t>(j)];
                for (int64_t e = 0; e < hd; ++e)
                    out[(i * heads + h) * hd + e] += s[j] / sum * v[cell * kv_dim + kvh * hd + e];
            }
        }
    return out;
}

// A layer's K and V cells (GQA: 6 query heads over 2 kv heads of 40) with deterministic values,
// in a CPU graph's weight buffer, for both attention paths' tests.
class PagedAttentionCells : public ::testing::Test {
protected:
    static constexpr int64_t hd = 40, heads = 6, kv_heads = 2, kv_dim = hd * kv_heads, n_cells = 96;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    CpuGraph cg;
    ggml_tensor* kc = ggml_new_tensor_2d(cg.weights_ctx, GGML_TYPE_F32, kv_dim, n_cells);
    ggml_tensor* vc = ggml_new_tensor_2d(cg.weights_ctx, GGML_TYPE_F32, kv_dim, n_cells);
    const std::vector<float> k = testing::ramp(static_cast<size_t>(kv_dim * n_cells), 7);
    const std::vector<float> v = testing::ramp(static_cast<size_t>(kv_dim * n_cells), 8);
    void SetUp() override { cg.upload_weights({{kc, k.data()}, {vc, v.data()}}); }
};

// cpu_paged_attention on `graph`'s cells: q [hd, heads, tokens], the read list, visible [2, tokens].
std::vector<float> paged_attention_on(CpuGraph& graph, ggml_tensor* kc, ggml_tensor* vc, const std::vector<float>& q,
                                      const std::vector<int32_t>& read, const std::vector<int32_t>& vis, int64_t hd,
                                      int64_t heads, float scale) {
    ggml_tensor *qt = nullptr, *rt = nullptr, *vt = nullptr;
    const int64_t m = static_cast<int64_t>(vis.size() / 2);
    return graph.run(
        [&](ggml_context* ctx) {
            qt = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, hd, heads, m);
            rt = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, static_cast<int64_t>(read.size()));
            vt = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 2, m);
            for (ggml_tensor* t : {qt, rt, vt}) ggml_set_input(t);
            return cpu_paged_attention(ctx, qt, kc, vc, rt, vt, scale);
        },
        [&] {
            ggml_backend_tensor_set(qt, q.data(), 0, q.size() * sizeof(float));
            ggml_backend_tensor_set(rt, read.data(), 0, read.size() * sizeof(int32_t));
            ggml_backend_tensor_set(vt, vis.data(), 0, vis.size() * sizeof(int32_t));
        });
}

// A long context is attended in pieces of its cells (attention_pieces: 1 to 4, by the count
// alone) that the threads share, then combined: still float64's result to f32 accuracy, and a
// token's bits the same alone or batched, on 1, 2 or 3 threads — for the portable loops (head size
// 40) and the AVX2 kernel (64; where the CPU has it).
TEST(PagedAttentionPieces, LongContextsEqualFloat64AloneOrBatchedOnAnyThreads) {
    EXPECT_EQ(attention_pieces(0), 1);
    EXPECT_EQ(attention_pieces(127), 1);
    EXPECT_EQ(attention_pieces(130), 2);
    EXPECT_EQ(attention_pieces(200), 3);
    EXPECT_EQ(attention_pieces(300), 4);
    EXPECT_EQ(attention_pieces(5000), kAttentionPieces);
    constexpr int64_t n_cells = 96;
    for (const auto& shape :
         {std::tuple{int64_t{40}, int64_t{6}, int64_t{2}}, std::tuple{int64_t{64}, int64_t{4}, int64_t{2}}}) {
        // (Plain variables, not structured bindings: clang 14's lambdas cannot capture those.)
        const int64_t hd = std::get<0>(shape), heads = std::get<1>(shape), kv_heads = std::get<2>(shape);
        SCOPED_TRACE("head size " + std::to_string(hd));
        const int64_t kv_dim = hd * kv_heads;
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        const std::vector<float> k = testing::ramp(static_cast<size_t>(kv_dim * n_cells), 7);
        const std::vector<float> v = testing::ramp(static_cast<size_t>(kv_dim * n_cells), 8);
        std::vector<int32_t> read, visible;
        for (const int32_t count : {63, 130, 300, 200, 64}) {  // 1, 2, 4 (the cap), 3 and 1 pieces
            visible.insert(visible.end(), {static_cast<int32_t>(read.size()), count});
            for (int32_t j = 0; j < count; ++j) read.push_back((j * 37 + count) % static_cast<int32_t>(n_cells));
        }
        const int64_t n = static_cast<int64_t>(visible.size() / 2);
        // Queries scaled up, so that the softmaxes are peaked and the pieces' maxima differ.
        std::vector<float> q = testing::ramp(static_cast<size_t>(hd * heads * n), 10);
        for (float& x : q) x *= 8.0f;
        // The cells in a graph of `threads` threads, and the attention of (q, vis) over them.
        auto attend = [&](int threads, const std::vector<float>& qs, const std::vector<int32_t>& vis) {
            CpuGraph graph(threads);
            ggml_tensor* kc = ggml_new_tensor_2d(graph.weights_ctx, GGML_TYPE_F32, kv_dim, n_cells);
            ggml_tensor* vc = ggml_new_tensor_2d(graph.weights_ctx, GGML_TYPE_F32, kv_dim, n_cells);
            graph.upload_weights({{kc, k.data()}, {vc, v.data()}});
            return paged_attention_on(graph, kc, vc, qs, read, vis, hd, heads, scale);
        };
        const std::vector<float> all = attend(2, q, visible);
        EXPECT_LT(rel_error(all, reference_attention(q, k, v, read, visible, hd, heads, kv_heads, scale)), 1e-6);
        const size_t per_token = static_cast<size_t>(hd * heads);
        for (int64_t i = 0; i < n; ++i) {
            const std::vector<float> qi(q.begin() + i * per_token, q.begin() + (i + 1) * per_token);
            const std::vector<float> alone = attend(2, qi, {visible[2 * i], visible[2 * i + 1]});
            EXPECT_EQ(0, std::memcmp(alone.data(), all.data() + i * per_token, per_token * sizeof(float)))
                << "token " << i;
        }
        for (const int threads : {1, 3}) {
            const std::vector<float> out = attend(threads, q, visible);
            ASSERT_EQ(out.size(), all.size());
            EXPECT_EQ(0, std::memcmp(out.data(), all.data(), all.size() * sizeof(float))) << threads << " threads";
        }
    }
}

TEST_F(PagedAttentionCells, CpuEqualsFloat64AndATokensResultDoesNotDependOnItsBatch) {
    // Three sequences with scattered cells (as paged blocks are); two tokens of the first (a
    // prompt chunk), one of each other (decodes).
    const std::vector<int32_t> read = {5, 9, 30, 31, 2, 77, 60, 61, 62, 11, 12, 90, 3};
    const std::vector<int32_t> visible = {0, 3, 0, 4, 4, 5, 9, 4};
    const int64_t n = 4;
    const std::vector<float> q = testing::ramp(static_cast<size_t>(hd * heads * n), 9);

    auto attend = [&](const std::vector<float>& qs, const std::vector<int32_t>& vis) {
        return paged_attention_on(cg, kc, vc, qs, read, vis, hd, heads, scale);
    };
    const std::vector<float> all = attend(q, visible);
    EXPECT_LT(rel_error(all, reference_attention(q, k, v, read, visible, hd, heads, kv_heads, scale)), 1e-6);
    const size_t per_token = static_cast<size_t>(hd * heads);
    for (int64_t i = 0; i < n; ++i) {
        const std::vector<float> qi(q.begin() + i * per_token, q.begin() + (i + 1) * per_token);
        const std::vector<float> alone = attend(qi, {visible[2 * i], visible[2 * i + 1]});
        EXPECT_EQ(0, std::memcmp(alone.data(), all.data() + i * per_token, per_token * sizeof(float))) << "token " << i;
    }
}

// The softmax's exp against the exact value over its whole domain: every float from 0 down to -87
// in steps that hit every binade, within 2e-7 relative; exactly 1 at 0; below -87 it stays tiny.
TEST(PagedAttentionKernel, SoftmaxExpIsExpToAFewUlps) {
    EXPECT_EQ(softmax_exp(0.0f), 1.0f);
    EXPECT_EQ(softmax_exp(-0.0f), 1.0f);
    double worst = 0;
    float at = 0;
    for (float x = -87.0f; x < 0.0f; x = std::nextafter(x, 1.0f) + (x < -1e-3f ? 1.3e-4f : -x * 0.01f)) {
        const double exact = std::exp(static_cast<double>(x));
        const double err = std::abs(softmax_exp(x) - exact) / exact;
        if (err > worst) worst = err, at = x;
    }
    EXPECT_LT(worst, 2e-7) << "at x = " << at;
    EXPECT_GE(softmax_exp(-1000.0f), 0.0f);
    EXPECT_LT(softmax_exp(-1000.0f), 1e-37f);
}

#if defined(__x86_64__)
// The AVX2 softmax is the portable one bit for bit: rows of 0 to 40 scores (whole groups of eight
// and tails), scores far below the maximum (the exp's floor), equal scores, one row or several.
TEST(PagedAttentionKernel, SoftmaxRowsAvx2IsThePortableRowsBitForBit) {
    if (!cpu_has_avx2_kernels()) GTEST_SKIP() << "no AVX2/FMA/F16C on this CPU";
    for (int64_t count = 0; count <= 40; ++count)
        for (const int64_t rows : {int64_t{1}, int64_t{3}}) {
            std::vector<float> scores = testing::ramp(static_cast<size_t>(rows * count), static_cast<int>(count));
            for (size_t i = 0; i < scores.size(); ++i) {
                if (i % 7 == 3) scores[i] = -150.0f;  // exp below the floor
                if (i % 11 == 5) scores[i] = 2.5f;    // ties
                scores[i] *= 4.0f;
            }
            std::vector<float> portable = scores, avx2 = scores;
            std::vector<float> max_p(static_cast<size_t>(rows), -1.0f), max_a(static_cast<size_t>(rows), -2.0f);
            std::vector<float> sum_p(static_cast<size_t>(rows), -1.0f), sum_a(static_cast<size_t>(rows), -2.0f);
            softmax_rows(portable.data(), rows, count, max_p.data(), sum_p.data());
            softmax_rows_avx2(avx2.data(), rows, count, max_a.data(), sum_a.data());
            if (!portable.empty()) {  // (an empty vector's data() may be null: not memcmp's to read)
                ASSERT_EQ(0, std::memcmp(portable.data(), avx2.data(), portable.size() * sizeof(float)))
                    << count << " scores, " << rows << " rows";
            }
            ASSERT_EQ(0, std::memcmp(max_p.data(), max_a.data(), max_p.size() * sizeof(float)))
                << count << " scores, " << rows << " rows";
            ASSERT_EQ(0, std::memcmp(sum_p.data(), sum_a.data(), sum_p.size() * sizeof(float)))
                << count << " scores, " << rows << " rows";
            if (count == 0) {
                EXPECT_EQ(sum_p[0], 0.0f);
                EXPECT_EQ(max_p[0], -INFINITY);
            }
        }
}
#endif

#if defined(__x86_64__)
// The AVX2 kernel is the portable loops' arithmetic, bit for bit, and both equal float64 to f32
// accuracy: f16 and f32 caches, groups of 1 to 4 query heads per kv head, ranges of one to
// three kv heads at once, cells scattered over the cache, windows of 0 to 300 cells (shorter and
// longer than the prefetch distance).
TEST(PagedAttentionKernel, Avx2IsThePortableLoopsBitForBit) {
    if (!cpu_has_avx2_kernels()) GTEST_SKIP() << "no AVX2/FMA/F16C on this CPU";
    const int64_t hd = 64, kv_heads = 3, n_cells = 320;
    const int64_t row = hd * kv_heads;
    const std::vector<ggml_fp16_t> k = to_f16(testing::ramp(static_cast<size_t>(row * n_cells), 11));
    const std::vector<ggml_fp16_t> v = to_f16(testing::ramp(static_cast<size_t>(row * n_cells), 12));
    const std::vector<float> kf = from_f16(k), vf = from_f16(v);
    std::vector<int32_t> read(static_cast<size_t>(n_cells));
    for (int64_t j = 0; j < n_cells; ++j) read[j] = static_cast<int32_t>((j * 37 + 5) % n_cells);
    for (const auto& [group, k_f16, v_f16] :
         {std::tuple{int64_t{1}, true, true}, std::tuple{int64_t{2}, true, true}, std::tuple{int64_t{3}, true, true},
          std::tuple{int64_t{2}, false, false}, std::tuple{int64_t{3}, false, true},
          std::tuple{int64_t{4}, true, false}}) {
        auto cells = [&](bool f16, const std::vector<ggml_fp16_t>& h, const std::vector<float>& f) {
            return f16 ? reinterpret_cast<const char*>(h.data()) : reinterpret_cast<const char*>(f.data());
        };
        PagedAttentionShape s{hd,
                              group * kv_heads,
                              group,
                              cells(k_f16, k, kf),
                              cells(v_f16, v, vf),
                              row * (k_f16 ? sizeof(ggml_fp16_t) : sizeof(float)),
                              row * (v_f16 ? sizeof(ggml_fp16_t) : sizeof(float)),
                              k_f16,
                              v_f16,
                              read.data(),
                              0.125f};
        ASSERT_TRUE(avx2_kernel_takes(s));
        const int64_t heads = group * kv_heads, per_kv = group * hd;
        const std::vector<float> q = testing::ramp(static_cast<size_t>(heads * hd), 13 + group);
        for (const int64_t count : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{17}, int64_t{300}}) {
            SCOPED_TRACE("group " + std::to_string(group) + (k_f16 ? ", f16 K" : ", f32 K") +
                         (v_f16 ? ", f16 V, " : ", f32 V, ") + std::to_string(count) + " cells");
            const int64_t first = 7;
            // The loops, one kv head at a time.
            std::vector<float> loops(static_cast<size_t>(heads * hd), -1.0f);
            std::vector<float> loops_stats(static_cast<size_t>(heads * 2), -1.0f);
            std::vector<float> scores(static_cast<size_t>(group * count));
            for (int64_t kvh = 0; kvh < kv_heads; ++kvh)
                attend_group_portable(s, q.data() + kvh * per_kv, kvh, first, count, loops.data() + kvh * per_kv,
                                      loops_stats.data() + kvh * group * 2, scores.data());
            // The kernel over kv-head ranges: all three, one, the last two.
            for (const auto& [kvh0, kvh1] : {std::pair{int64_t{0}, int64_t{3}}, std::pair{int64_t{1}, int64_t{2}},
                                             std::pair{int64_t{1}, int64_t{3}}}) {
                std::vector<float> kernel(loops.size(), -1.0f), kernel_stats(loops_stats.size(), -1.0f);
                std::vector<float> sk(static_cast<size_t>((kvh1 - kvh0) * group * count));
                attend_heads_avx2(s, q.data(), kvh0, kvh1, first, count, kernel.data(), kernel_stats.data(), sk.data());
                EXPECT_EQ(0, std::memcmp(loops.data() + kvh0 * per_kv, kernel.data() + kvh0 * per_kv,
                                         static_cast<size_t>((kvh1 - kvh0) * per_kv) * sizeof(float)))
                    << "kv heads " << kvh0 << ".." << kvh1;
                EXPECT_EQ(0, std::memcmp(loops_stats.data() + kvh0 * group * 2, kernel_stats.data() + kvh0 * group * 2,
                                         static_cast<size_t>((kvh1 - kvh0) * group * 2) * sizeof(float)))
                    << "kv heads " << kvh0 << ".." << kvh1;
                EXPECT_EQ(kernel[0], kvh0 == 0 ? loops[0] : -1.0f) << "wrote outside its heads";
                EXPECT_EQ(kernel_stats[0], kvh0 == 0 ? loops_stats[0] : -1.0f) << "wrote outside its heads";
            }
            if (count == 0) continue;
            // The pieces' sums divided by their softmax sums.
            for (int64_t h = 0; h < heads; ++h)
                for (int64_t e = 0; e < hd; ++e) loops[h * hd + e] /= loops_stats[2 * h + 1];
            std::vector<double> ref(loops.size());
            for (int64_t h = 0; h < heads; ++h) {
                const int64_t kvh = h / group;
                std::vector<double> p(static_cast<size_t>(count));
                double m = -1e300, sum = 0;
                for (int64_t j = 0; j < count; ++j) {
                    double d = 0;
                    for (int64_t e = 0; e < hd; ++e)
                        d += double(q[h * hd + e]) * kf[read[first + j] * row + kvh * hd + e];
                    p[j] = d * s.scale;
                    m = std::max(m, p[j]);
                }
                for (double& x : p) sum += x = std::exp(x - m);
                for (int64_t e = 0; e < hd; ++e) {
                    double o = 0;
                    for (int64_t j = 0; j < count; ++j) o += p[j] * vf[read[first + j] * row + kvh * hd + e];
                    ref[h * hd + e] = o / sum;
                }
            }
            EXPECT_LT(rel_error(loops, ref), 1e-5);
        }
    }
}
#endif

// The GPU backends' attention (graph_ops' segmented_attention: each sequence gathered and attended
// by itself), run here on the CPU backend: the same result as float64, and a sequence's output
// is bit for bit the same alone as beside others (its ops have its own shapes only).
TEST_F(PagedAttentionCells, SegmentedEqualsFloat64AndASequencesResultDoesNotDependOnItsBatch) {
    // Three sequences' segments with scattered cells: a two-token prompt chunk, two decodes.
    StepBatch b;
    b.read_cells = {5, 9, 30, 31, 2, 77, 60, 61, 62, 11, 12, 90, 3};
    b.visible = {0, 3, 0, 4, 4, 5, 9, 4};
    b.tokens = {1, 2, 3, 4};
    b.segments = {{0, 2, 0, 4}, {2, 1, 4, 5}, {3, 1, 9, 4}};
    const std::vector<float> q = testing::ramp(static_cast<size_t>(hd * heads * 4), 9);
    const size_t per_token = static_cast<size_t>(hd * heads);

    auto attend = [&](const StepBatch& s, const std::vector<float>& qs) {
        ggml_tensor *qt = nullptr, *rt = nullptr, *mt = nullptr;
        const std::vector<float> masks = s.segment_masks();
        return cg.run(
            [&](ggml_context* ctx) {
                qt = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, hd, heads, s.n_tokens());
                rt = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, s.n_kv());
                mt = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, static_cast<int64_t>(masks.size()));
                for (ggml_tensor* t : {qt, rt, mt}) ggml_set_input(t);
                return segmented_attention(ctx, qt, kc, vc, rt, mt, s.segments, scale);
            },
            [&] {
                ggml_backend_tensor_set(qt, qs.data(), 0, qs.size() * sizeof(float));
                ggml_backend_tensor_set(rt, s.read_cells.data(), 0, s.read_cells.size() * sizeof(int32_t));
                ggml_backend_tensor_set(mt, masks.data(), 0, masks.size() * sizeof(float));
            });
    };
    const std::vector<float> all = attend(b, q);
    EXPECT_LT(rel_error(all, reference_attention(q, k, v, b.read_cells, b.visible, hd, heads, kv_heads, scale)), 1e-5);
    for (const StepBatch::Segment& g : b.segments) {
        StepBatch alone;  // the sequence by itself, its cells first in the read list
        alone.read_cells.assign(b.read_cells.begin() + g.read, b.read_cells.begin() + g.read + g.n_read);
        alone.tokens.assign(b.tokens.begin() + g.token, b.tokens.begin() + g.token + g.n_tokens);
        for (int i = 0; i < g.n_tokens; ++i)
            alone.visible.insert(alone.visible.end(), {0, b.visible[2 * (g.token + i) + 1]});
        alone.segments = {{0, g.n_tokens, 0, g.n_read}};
        const std::vector<float> qs(q.begin() + g.token * per_token, q.begin() + (g.token + g.n_tokens) * per_token);
        const std::vector<float> out = attend(alone, qs);
        EXPECT_EQ(0, std::memcmp(out.data(), all.data() + g.token * per_token, out.size() * sizeof(float)))
            << "segment at token " << g.token;
    }
}

}  // namespace
}  // namespace parlance
