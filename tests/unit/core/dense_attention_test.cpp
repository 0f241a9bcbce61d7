// The CPU's full attention (core/dense_attention): close to softmax(scale q k^T) v computed in
// double precision, for shapes that exercise every edge (query blocks and key tiles cut short, a
// last value slice of 8 components, more queries than keys and fewer, several heads and batch
// entries); and the same bits for a batch entry alone or beside others, however the work is split.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace parlance
