// Times core/weight_product's multi-column kernel alone: one weight matrix (rows x in, random)
// times `cols` activation columns, split over threads as the ggml custom op splits it (24-row
// blocks, 64-column panels), best of `reps`; prints GFLOP/s and a hash of the output's bits. A matrix larger than the
// last-level cache (e.g. 16384 x 1024 = 32 MiB) streams its weights from memory as a model's layers do.
//
//   weight_product_bench ROWS IN COLS [REPS=5] [THREADS=1] [TYPE=f16|f32|q8_0]
// (q8_0: the weights rounded to llama.cpp's blocks; PARLANCE_CPU_KERNELS=avx2 times the AVX2 tiles
// on a CPU with AVX-512 VNNI — the hash must not change.)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <sys/mman.h>

#include <ggml.h>

#include "src/cli/runtime_environment.h"
#include "src/core/weight_product.h"

int main(int argc, char** argv) {
    parlance::cli::apply_runtime_environment();  // PARLANCE_CPU_KERNELS=avx2: the AVX2 path
    if (argc < 4) {
        std::fprintf(stderr, "usage: weight_product_bench ROWS IN COLS [REPS] [THREADS] [f16|f32|q8_0]\n");
        return 2;
    }
    const int64_t rows = std::atoll(argv[1]), in = std::atoll(argv[2]), cols = std::atoll(argv[3]);
    const int reps = argc > 4 ? std::atoi(argv[4]) : 5, threads = argc > 5 ? std::atoi(argv[5]) : 1;
    const std::string type_name = argc > 6 ? argv[6] : "f16";
    const bool f32 = type_name == "f32", q8 = type_name == "q8_0";
    const ggml_type type = f32 ? GGML_TYPE_F32 : q8 ? GGML_TYPE_Q8_0 : GGML_TYPE_F16;
    const size_t row_bytes = ggml_row_size(type, in);
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<ggml_fp16_t> w16(static_cast<size_t>(rows * in));
    for (auto& v : w16) v = ggml_fp32_to_fp16(u(rng));
    std::vector<float> w32(f32 ? w16.size() : 0);
    for (size_t i = 0; i < w32.size(); ++i) w32[i] = ggml_fp16_to_fp32(w16[i]);
    std::vector<uint8_t> wq8(q8 ? row_bytes * static_cast<size_t>(rows) : 0);
    if (q8) {
        std::vector<float> wf(w16.size());
        for (size_t i = 0; i < wf.size(); ++i) wf[i] = ggml_fp16_to_fp32(w16[i]);
        ggml_quantize_chunk(GGML_TYPE_Q8_0, wf.data(), wq8.data(), 0, rows, in, nullptr);
    }
    const void* src = f32  ? static_cast<const void*>(w32.data())
                      : q8 ? static_cast<const void*>(wq8.data())
                           : static_cast<const void*>(w16.data());
    // The weights in 2 MiB pages, as a model's (core/backend's prefer_huge_pages): with 4 KiB
    // pages the hardware prefetchers stop at every page and a streaming product reads far slower.
    const size_t w_bytes = row_bytes * static_cast<size_t>(rows), page = size_t{2} << 20;
    void* w_pages = std::aligned_alloc(page, (w_bytes + page - 1) / page * page);
    madvise(w_pages, (w_bytes + page - 1) / page * page, MADV_HUGEPAGE);
    std::memcpy(w_pages, src, w_bytes);
    const void* w = w_pages;
    std::vector<float> x(static_cast<size_t>(cols * in)), y(static_cast<size_t>(cols * rows));
    for (auto& v : x) v = u(rng);
    constexpr int64_t kBlock = 24, kPanel = 64;
    auto part = [&](int ith) {
        const int64_t blocks = (rows + kBlock - 1) / kBlock;
        const int64_t r0 = blocks * ith / threads * kBlock, r1 = std::min(rows, blocks * (ith + 1) / threads * kBlock);
        for (int64_t p = 0; p < cols; p += kPanel)
            if (!parlance::weight_product_rows(type, w, row_bytes, in, x.data() + p * in, in,
                                               std::min(kPanel, cols - p), y.data() + p * rows, rows, r0, r1))
                std::exit(3);
    };
    if (!parlance::weight_product_kernel_available()) {
        std::fprintf(stderr, "no vector kernel on this CPU\n");
        return 3;
    }
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        if (threads == 1) {
            part(0);  // no thread start in the timing: small products take tens of microseconds
        } else {
            std::vector<std::thread> pool;
            for (int t = 0; t < threads; ++t) pool.emplace_back(part, t);
            for (auto& t : pool) t.join();
        }
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    // FNV-1a of the output's bytes: two builds of the kernel that sum in the same order print the same.
    uint64_t bits = 1469598103934665603ull;
    for (const float v : y) {
        uint32_t u;
        std::memcpy(&u, &v, sizeof u);
        for (int b = 0; b < 4; ++b) bits = (bits ^ ((u >> (8 * b)) & 0xFF)) * 1099511628211ull;
    }
    std::printf(
        "{\"type\":\"%s\",\"rows\":%lld,\"in\":%lld,\"cols\":%lld,\"threads\":%d,\"ms\":%.3f,\"gflops\":%.1f,"
        "\"output_fnv\":\"%016llx\"}\n",
        type_name.c_str(), static_cast<long long>(rows), static_cast<long long>(in), static_cast<long long>(cols),
        threads, best * 1e3, 2.0 * rows * in * cols / best / 1e9, static_cast<unsigned long long>(bits));
}
