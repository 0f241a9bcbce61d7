// The CPU's full attention (core/dense_attention): close to softmax(scale q k^T) v computed in
// double precision, for shapes that exercise every edge (query blocks and key tiles cut short, a
// last value slice of 8 components, more queries than keys and fewer, several heads and batch
// entries); and the same bits for a batch entry alone or beside others, however the work is split.
// The packed variant (a decoder's cross-attention over windows packed as f16 when written): the
// packing nodes and the kernel against the same double-precision attention over the f16-rounded
// window, the softmaxed weights it can hand out, and a run's bits alone or beside other runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <ggml-cpu.h>

#include "core/dense_attention.h"
#include "core/dense_attention_kernel.h"

namespace parlance {
namespace {

struct Shape {
    int64_t hd, heads, tq, tk, batch;
};

struct Inputs {
    std::vector<float> q, k, v;  // [hd, heads, t, batch]
};

Inputs random_inputs(const Shape& s, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, 1.0f);
    Inputs in;
    in.q.resize(static_cast<size_t>(s.hd * s.heads * s.tq * s.batch));
    in.k.resize(static_cast<size_t>(s.hd * s.heads * s.tk * s.batch));
    in.v.resize(in.k.size());
    for (auto* a : {&in.q, &in.k, &in.v})
        for (float& x : *a) x = d(rng);
    return in;
}

// The op through a ggml graph on `threads` threads.
std::vector<float> run(const Shape& s, const Inputs& in, float scale, int threads) {
    ggml_init_params p{size_t(64) << 20, nullptr, false};
    ggml_context* ctx = ggml_init(p);
    auto tensor = [&](const std::vector<float>& data, int64_t t) {
        ggml_tensor* x = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, s.hd, s.heads, t, s.batch);
        std::memcpy(x->data, data.data(), data.size() * sizeof(float));
        return x;
    };
    ggml_tensor* o = cpu_dense_attention(ctx, tensor(in.q, s.tq), tensor(in.k, s.tk), tensor(in.v, s.tk), scale);
    ggml_cgraph* g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, o);
    ggml_graph_compute_with_ctx(ctx, g, threads);
    std::vector<float> out(static_cast<const float*>(o->data), static_cast<const float*>(o->data) + ggml_nelements(o));
    ggml_free(ctx);
    return out;
}

// Row (b, t, h) of softmax(scale q k^T) v in double precision.
std::vector<double> reference_row(const Shape& s, const Inputs& in, float scale, int64_t b, int64_t t, int64_t h) {
    const int64_t stride = s.heads * s.hd;
    const float* q = in.q.data() + (b * s.tq + t) * stride + h * s.hd;
    std::vector<double> scores(static_cast<size_t>(s.tk));
    double mx = -INFINITY;
    for (int64_t j = 0; j < s.tk; ++j) {
        const float* k = in.k.data() + (b * s.tk + j) * stride + h * s.hd;
        double dot = 0.0;
        for (int64_t d = 0; d < s.hd; ++d) dot += static_cast<double>(q[d]) * k[d];
        scores[j] = dot * scale;
        mx = std::max(mx, scores[j]);
    }
    double sum = 0.0;
    for (double& x : scores) sum += (x = std::exp(x - mx));
    std::vector<double> out(static_cast<size_t>(s.hd), 0.0);
    for (int64_t j = 0; j < s.tk; ++j) {
        const float* v = in.v.data() + (b * s.tk + j) * stride + h * s.hd;
        for (int64_t d = 0; d < s.hd; ++d) out[d] += scores[j] / sum * v[d];
    }
    return out;
}

class DenseAttention : public ::testing::Test {
protected:
    void SetUp() override {
        if (!cpu_dense_attention_available())
            GTEST_SKIP() << "no AVX2 + FMA with SLEEF here: callers use ggml's attention";
    }
};

TEST_F(DenseAttention, MatchesSoftmaxAttentionInDoublePrecision) {
    const Shape shapes[] = {
        {64, 4, 50, 50, 1},   // a short window: one block cut short, four key tiles cut short
        {64, 2, 37, 100, 2},  // fewer queries than keys, two batch entries
        {40, 3, 30, 9, 1},    // a last value slice of 8 components; fewer keys than one tile
        {8, 1, 25, 17, 1},    // the smallest head
    };
    unsigned seed = 1;
    for (const Shape& s : shapes) {
        const Inputs in = random_inputs(s, seed++);
        const float scale = 1.0f / std::sqrt(static_cast<float>(s.hd));
        const std::vector<float> out = run(s, in, scale, 2);
        double worst = 0.0;
        for (int64_t b = 0; b < s.batch; ++b)
            for (int64_t t = 0; t < s.tq; ++t)
                for (int64_t h = 0; h < s.heads; ++h) {
                    const std::vector<double> want = reference_row(s, in, scale, b, t, h);
                    const float* got = out.data() + ((b * s.tq + t) * s.heads + h) * s.hd;
                    for (int64_t d = 0; d < s.hd; ++d) worst = std::max(worst, std::abs(got[d] - want[d]));
                }
        EXPECT_LT(worst, 2e-6) << "hd " << s.hd << " heads " << s.heads << " tq " << s.tq << " tk " << s.tk;
    }
}

TEST_F(DenseAttention, ABatchEntryIsTheSameBitsAloneAndOnAnyNumberOfThreads) {
    const Shape both{64, 4, 61, 61, 2};
    const Inputs in = random_inputs(both, 11);
    const float scale = 0.125f;
    const std::vector<float> reference = run(both, in, scale, 1);
    EXPECT_EQ(run(both, in, scale, 2), reference);
    // The work units split at uneven points, as 3 and 7 threads would take them (called directly:
    // more OpenMP threads than the tests' two leave libomp allocations LeakSanitizer reports).
    DenseAttentionJob job{in.q.data(), in.k.data(), in.v.data(), nullptr,    both.hd,
                          both.heads,  both.tq,     both.tk,     both.batch, scale};
    for (const int parts : {3, 7}) {
        std::vector<float> out(reference.size(), 0.0f);
        job.o = out.data();
        for (int p = 0; p < parts; ++p)
            dense_attention_units(job, job.units() * p / parts, job.units() * (p + 1) / parts);
        EXPECT_EQ(out, reference) << parts << " parts";
    }
    // Entry 1 alone.
    const Shape one{64, 4, 61, 61, 1};
    const size_t n = static_cast<size_t>(64 * 4 * 61);
    Inputs alone;
    alone.q.assign(in.q.begin() + n, in.q.end());
    alone.k.assign(in.k.begin() + n, in.k.end());
    alone.v.assign(in.v.begin() + n, in.v.end());
    const std::vector<float> second = run(one, alone, scale, 2);
    EXPECT_TRUE(std::equal(second.begin(), second.end(), reference.begin() + static_cast<std::ptrdiff_t>(n)));
}

// A window of tk keys and values for the packed op: written with pack_keys_f16/pack_values_f16
// through a graph, as the encoder writes them.
struct PackedWindow {
    std::vector<float> k, v;  // [hd * heads, tk], f16-rounded: what the kernel sees
    ggml_tensor *pk = nullptr, *pv = nullptr;
};

PackedWindow pack_window(ggml_context* ctx, int64_t hd, int64_t heads, int64_t tk, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, 1.0f);
    PackedWindow w;
    ggml_tensor* k = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, hd * heads, tk);
    ggml_tensor* v = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, hd * heads, tk);
    for (ggml_tensor* t : {k, v}) {
        float* x = static_cast<float*>(t->data);
        for (int64_t i = 0; i < ggml_nelements(t); ++i) x[i] = d(rng);
    }
    w.pk = new_packed_keys(ctx, hd, heads, tk);
    w.pv = new_packed_values(ctx, hd, heads, tk);
    std::memset(w.pk->data, 0xff, ggml_nbytes(w.pk));  // NaN f16 in the last tile's padding: must not matter
    ggml_cgraph* g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, pack_keys_f16(ctx, k, w.pk));
    ggml_build_forward_expand(g, pack_values_f16(ctx, v, w.pv));
    ggml_graph_compute_with_ctx(ctx, g, 2);
    for (auto [from, to] : {std::pair{k, &w.k}, std::pair{v, &w.v}}) {
        const float* x = static_cast<const float*>(from->data);
        for (int64_t i = 0; i < ggml_nelements(from); ++i) to->push_back(ggml_fp16_to_fp32(ggml_fp32_to_fp16(x[i])));
    }
    return w;
}

// The op over `q` ([hd * heads, rows]) with one run per (first row, rows, window).
struct RunSpec {
    int64_t row, n;
    const PackedWindow* window;
};

std::vector<float> run_packed(ggml_context* ctx, const std::vector<float>& q, int64_t width,
                              const std::vector<RunSpec>& runs, float scale, std::vector<float*> probabilities = {}) {
    ggml_tensor* qt = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, width, static_cast<int64_t>(q.size()) / width);
    std::memcpy(qt->data, q.data(), q.size() * sizeof(float));
    PackedAttentionArgs args;
    args.scale = scale;
    for (const RunSpec& r : runs) args.add_run(r.row, r.n, r.window->pk, r.window->pv);
    args.probabilities = std::move(probabilities);
    ggml_tensor* o = cpu_packed_attention(ctx, qt, args);
    ggml_cgraph* g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, o);
    ggml_graph_compute_with_ctx(ctx, g, 2);
    return {static_cast<const float*>(o->data), static_cast<const float*>(o->data) + ggml_nelements(o)};
}

class PackedAttention : public ::testing::Test {
protected:
    void SetUp() override {
        if (!cpu_dense_attention_available())
            GTEST_SKIP() << "no AVX2 + FMA + F16C with SLEEF here: the decoder keeps its graph products";
        ggml_init_params p{size_t(64) << 20, nullptr, false};
        ctx_ = ggml_init(p);
    }
    void TearDown() override {
        if (ctx_) ggml_free(ctx_);
    }
    ggml_context* ctx_ = nullptr;
};

TEST_F(PackedAttention, MatchesSoftmaxAttentionOverTheF16Window) {
    const int64_t hd = 64, heads = 3, width = hd * heads;
    // Two windows whose key counts are not whole tiles; runs of 1, 5 (a request's beams), 7 (two
    // sub-blocks) and 30 queries (two blocks).
    const PackedWindow a = pack_window(ctx_, hd, heads, 50, 1), b = pack_window(ctx_, hd, heads, 50, 2);
    const std::vector<RunSpec> runs = {{0, 5, &a}, {5, 1, &b}, {6, 30, &a}, {36, 7, &b}};
    std::mt19937 rng(3);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> q(static_cast<size_t>(width * 43));
    for (float& x : q) x = d(rng);
    const float scale = 0.125f;
    const std::vector<float> out = run_packed(ctx_, q, width, runs, scale);
    double worst = 0.0;
    for (const RunSpec& r : runs) {
        const Shape s{hd, heads, 1, 50, 1};
        for (int64_t t = r.row; t < r.row + r.n; ++t) {
            Inputs in;
            in.q.assign(q.begin() + t * width, q.begin() + (t + 1) * width);
            in.k = r.window->k;
            in.v = r.window->v;
            for (int64_t h = 0; h < heads; ++h) {
                const std::vector<double> want = reference_row(s, in, scale, 0, 0, h);
                for (int64_t c = 0; c < hd; ++c)
                    worst = std::max(worst, std::abs(out[t * width + h * hd + c] - want[c]));
            }
        }
    }
    EXPECT_LT(worst, 2e-6);
}

TEST_F(PackedAttention, HandsOutTheSoftmaxedWeightsItUsed) {
    const int64_t hd = 16, heads = 2, tk = 37;
    const PackedWindow w = pack_window(ctx_, hd, heads, tk, 4);
    std::vector<float> q(static_cast<size_t>(hd * heads * 3));
    for (size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.37f * static_cast<float>(i));
    std::vector<float> weights(static_cast<size_t>(3 * tk), -1.0f);
    const std::vector<float> out = run_packed(ctx_, q, hd * heads, {{0, 3, &w}}, 0.25f, {nullptr, weights.data()});
    // Head 1's weights: rows of tk summing to 1, and the output is them times V.
    for (int64_t t = 0; t < 3; ++t) {
        double sum = 0.0;
        std::vector<double> o(static_cast<size_t>(hd), 0.0);
        for (int64_t j = 0; j < tk; ++j) {
            const float p = weights[t * tk + j];
            ASSERT_GE(p, 0.0f);
            sum += p;
            for (int64_t c = 0; c < hd; ++c) o[c] += p * w.v[j * hd * heads + hd + c];
        }
        EXPECT_NEAR(sum, 1.0, 1e-6);
        for (int64_t c = 0; c < hd; ++c) EXPECT_NEAR(out[t * hd * heads + hd + c], o[c], 1e-6);
    }
}

TEST_F(PackedAttention, ARunIsTheSameBitsAloneBesideOthersAndHoweverTheWorkIsSplit) {
    const int64_t hd = 64, heads = 4, width = hd * heads, tk = 1500;
    const PackedWindow a = pack_window(ctx_, hd, heads, tk, 5), b = pack_window(ctx_, hd, heads, tk, 6);
    std::vector<float> q(static_cast<size_t>(width * 12));
    std::mt19937 rng(7);
    std::normal_distribution<float> d(0.0f, 1.0f);
    for (float& x : q) x = d(rng);
    const std::vector<float> together = run_packed(ctx_, q, width, {{0, 5, &a}, {5, 2, &b}, {7, 5, &a}}, 0.125f);
    // The last run alone (its rows first).
    const std::vector<float> tail(q.begin() + 7 * width, q.end());
    const std::vector<float> alone = run_packed(ctx_, tail, width, {{0, 5, &a}}, 0.125f);
    EXPECT_TRUE(std::equal(alone.begin(), alone.end(), together.begin() + 7 * width));
    // One run of 12 rows over window a: rows 0-4 are the same bits as in the first run.
    const std::vector<float> one = run_packed(ctx_, q, width, {{0, 12, &a}}, 0.125f);
    EXPECT_TRUE(std::equal(one.begin(), one.begin() + 5 * width, together.begin()));
    // Units split unevenly, as other thread counts take them.
    const PackedAttentionRun runs[] = {
        {0, 5, static_cast<const uint16_t*>(a.pk->data), static_cast<const uint16_t*>(a.pv->data)},
        {5, 2, static_cast<const uint16_t*>(b.pk->data), static_cast<const uint16_t*>(b.pv->data)},
        {7, 5, static_cast<const uint16_t*>(a.pk->data), static_cast<const uint16_t*>(a.pv->data)}};
    for (const int parts : {3, 5}) {
        std::vector<float> out(together.size(), 0.0f);
        PackedAttentionJob job{q.data(), out.data(), hd, heads, tk, 0.125f, runs, 3};
        for (int p = 0; p < parts; ++p)
            packed_attention_units(job, job.units() * p / parts, job.units() * (p + 1) / parts);
        EXPECT_EQ(out, together) << parts << " parts";
    }
}

}  // namespace
}  // namespace parlance
