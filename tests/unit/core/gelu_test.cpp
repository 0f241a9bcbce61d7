// The CPU GELU (core/gelu): within a few ulp of the exact value everywhere, the same value for the
// same input wherever it sits in a row (the vector tail included), and the same results as ggml's
// own GELU through a graph, to the last few bits.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <ggml-alloc.h>
#include <ggml-backend.h>
#include <ggml-cpu.h>

#include "core/backend.h"
#include "core/gelu.h"

namespace parlance {
namespace {

double exact_gelu(double x) {
    return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}

TEST(Gelu, CloseToTheExactValue) {
    std::printf("[ kernel   ] %s\n", gelu_erf_kernel());
    std::vector<float> x;
    for (double v = -12.0; v <= 12.0; v += 1.0 / 512) x.push_back(static_cast<float>(v));
    std::vector<float> y(x.size());
    gelu_erf_values(x.data(), y.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
        const double want = exact_gelu(x[i]);
        // 0.5 x (1 + erf): erf within 1 ulp of 1, then two roundings; |x| scales the absolute error.
        EXPECT_NEAR(y[i], want, 4e-7 * std::max(1.0, std::abs(double(x[i])))) << "x = " << x[i];
    }
    const float special[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 100.0f, -100.0f};
    float out[6];
    gelu_erf_values(special, out, 6);
    EXPECT_EQ(out[0], 0.0f);
    EXPECT_EQ(out[4], 100.0f);
    EXPECT_EQ(out[5], -0.0f);
}

TEST(Gelu, AValueDoesNotDependOnItsPlaceInTheRow) {
    std::mt19937 rng(7);
    std::normal_distribution<float> d(0.0f, 2.0f);
    std::vector<float> x(37);
    for (float& v : x) v = d(rng);
    std::vector<float> all(x.size());
    gelu_erf_values(x.data(), all.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
        float one = 0.0f;
        gelu_erf_values(&x[i], &one, 1);  // alone: the padded tail
        EXPECT_EQ(one, all[i]) << i;
    }
}

// Through a graph on the CPU backend, as the encoders use it, next to ggml_gelu_erf.
TEST(Gelu, GraphMatchesGgmlsGelu) {
    BackendOptions bo;
    bo.threads = 2;
    Backend backend(bo);
    ggml_init_params p{size_t(64) << 20, nullptr, false};
    ggml_context* ctx = ggml_init(p);
    const int64_t width = 300, rows = 41;
    // A "weight" in a CPU backend buffer: what tells gelu_erf the graph runs on the CPU.
    ggml_init_params wp{ggml_tensor_overhead(), nullptr, true};
    ggml_context* wctx = ggml_init(wp);
    ggml_tensor* w = ggml_new_tensor_1d(wctx, GGML_TYPE_F32, 1);
    ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors_from_buft(wctx, ggml_backend_cpu_buffer_type());
    ggml_tensor* x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, width, rows);
    std::mt19937 rng(3);
    std::normal_distribution<float> d(0.0f, 3.0f);
    for (int64_t i = 0; i < width * rows; ++i) static_cast<float*>(x->data)[i] = d(rng);
    ggml_tensor* ours = gelu_erf(ctx, x, w);
    ggml_tensor* theirs = ggml_gelu_erf(ctx, x);
    if (std::string(gelu_erf_kernel()) != "scalar") {
        EXPECT_EQ(ours->op, GGML_OP_MAP_CUSTOM1);
    }
    ggml_cgraph* g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, ours);
    ggml_build_forward_expand(g, theirs);
    ggml_graph_compute_with_ctx(ctx, g, 2);
    for (int64_t i = 0; i < width * rows; ++i) {
        const float a = static_cast<float*>(ours->data)[i], b = static_cast<float*>(theirs->data)[i];
        ASSERT_NEAR(a, b, 3e-7f * std::max(1.0f, std::abs(static_cast<float*>(x->data)[i]))) << i;
    }
    ggml_free(ctx);
    ggml_backend_buffer_free(wbuf);
    ggml_free(wctx);
}

}  // namespace
}  // namespace parlance
