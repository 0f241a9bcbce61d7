// Times core/weight_product's multi-column kernel alone: one f16 weight matrix (rows x in, random)
// times `cols` activation columns, split over threads as the ggml custom op splits it (24-row
// blocks, 64-column panels), best of `reps`; prints GFLOP/s. A matrix larger than the last-level
// cache (e.g. 16384 x 1024 = 32 MiB) streams its weights from memory as a model's layers do.
//
//   weight_product_bench ROWS IN COLS [REPS=5] [THREADS=1]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include <ggml.h>

#include "src/core/weight_product.h"

int main(int argc, char** argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: weight_product_bench ROWS IN COLS [REPS] [THREADS]\n");
        return 2;
    }
    const int64_t rows = std::atoll(argv[1]), in = std::atoll(argv[2]), cols = std::atoll(argv[3]);
    const int reps = argc > 4 ? std::atoi(argv[4]) : 5, threads = argc > 5 ? std::atoi(argv[5]) : 1;
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<ggml_fp16_t> w(static_cast<size_t>(rows * in));
    for (auto& v : w) v = ggml_fp32_to_fp16(u(rng));
    std::vector<float> x(static_cast<size_t>(cols * in)), y(static_cast<size_t>(cols * rows));
    for (auto& v : x) v = u(rng);
    constexpr int64_t kBlock = 24, kPanel = 64;
    auto part = [&](int ith) {
        const int64_t blocks = (rows + kBlock - 1) / kBlock;
        const int64_t r0 = blocks * ith / threads * kBlock, r1 = std::min(rows, blocks * (ith + 1) / threads * kBlock);
        for (int64_t p = 0; p < cols; p += kPanel)
            if (!parlance::weight_product_rows(GGML_TYPE_F16, w.data(), static_cast<size_t>(in) * 2, in,
                                               x.data() + p * in, in, std::min(kPanel, cols - p), y.data() + p * rows,
                                               rows, r0, r1))
                std::exit(3);
    };
    if (!parlance::weight_product_kernel_available()) {
        std::fprintf(stderr, "no vector kernel on this CPU\n");
        return 3;
    }
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        std::vector<std::thread> pool;
        for (int t = 0; t < threads; ++t) pool.emplace_back(part, t);
        for (auto& t : pool) t.join();
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::printf("{\"rows\":%lld,\"in\":%lld,\"cols\":%lld,\"threads\":%d,\"ms\":%.3f,\"gflops\":%.1f}\n",
                static_cast<long long>(rows), static_cast<long long>(in), static_cast<long long>(cols), threads,
                best * 1e3, 2.0 * rows * in * cols / best / 1e9);
}
