// Times core/cpu_attention's CPU work alone on a decode step's shape: one query token over CELLS
// cached tokens in every layer of a Qwen3-0.6B-shaped cache (28 layers, 16 query heads, 8 kv heads
// of 128), each layer the op's two passes as its ggml nodes run them (attend_pieces: the threads
// share the pieces of the token's cells and their kv heads; a barrier; combine_pieces; a barrier).
// Between steps the threads stream a 256 MiB buffer, as a step's weights would, so the cells come
// from memory, as in a real step. Prints the median step, the cells' bytes per step and the rate
// they were read at, next to the same threads reading the same bytes contiguously with vector
// loads (bench/read_speed.h's read) in the same run (the memory's own rate: the anchor).
//
//   paged_attention_bench CELLS [REPS=30] [THREADS=2] [f16|f32] [LAYERS=28] [--hot]
//
// `--hot` leaves the cells in cache between steps (with LAYERS=4, 300 cells' 5 MB stay in L3): the
// kernel's arithmetic alone, without the memory.
#include <algorithm>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <ggml.h>

#include "bench/read_speed.h"
#include "src/cli/runtime_environment.h"
#include "src/core/backend.h"
#include "src/core/cpu_attention_kernel.h"
#include "src/core/cpu_features.h"

namespace {

constexpr int64_t kHeads = 16, kKvHeads = 8, kHd = 128;

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    parlance::cli::apply_runtime_environment();  // PARLANCE_CPU_KERNELS=avx2: the AVX2 path
    std::vector<std::string> args;
    bool hot = false;
    for (int i = 1; i < argc; ++i) {
        if (std::string(argv[i]) == "--hot")
            hot = true;
        else
            args.push_back(argv[i]);
    }
    if (args.empty()) {
        std::fprintf(stderr, "usage: paged_attention_bench CELLS [REPS] [THREADS] [f16|f32] [LAYERS] [--hot]\n");
        return 2;
    }
    const int64_t cells = std::atoll(args[0].c_str());
    const int reps = args.size() > 1 ? std::atoi(args[1].c_str()) : 30;
    const int threads = args.size() > 2 ? std::atoi(args[2].c_str()) : 2;
    const bool f16 = !(args.size() > 3 && args[3] == "f32");
    const int layers = args.size() > 4 ? std::atoi(args[4].c_str()) : 28;
    if (!parlance::cpu_has_avx2_kernels()) {
        std::fprintf(stderr, "no AVX2 kernel on this CPU\n");
        return 3;
    }
    const size_t elt = f16 ? 2 : 4, row = static_cast<size_t>(kKvHeads * kHd) * elt;
    const size_t layer_bytes = static_cast<size_t>(cells) * row;
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    // K then V of every layer, each layer's cells back to back (a sequence's blocks in order).
    // 2 MiB-aligned and asking for huge pages, as the server's KvStorage does.
    const size_t kv_bytes = (2 * layers * layer_bytes + (size_t(2) << 20) - 1) / (size_t(2) << 20) * (size_t(2) << 20);
    std::unique_ptr<char, decltype(&std::free)> kv_mem(
        static_cast<char*>(std::aligned_alloc(size_t(2) << 20, kv_bytes)), &std::free);
    parlance::prefer_huge_pages(kv_mem.get(), kv_bytes);
    std::span<char> kv(kv_mem.get(), 2 * layers * layer_bytes);
    for (size_t i = 0; i < kv.size(); i += elt) {
        if (f16) {
            const ggml_fp16_t h = ggml_fp32_to_fp16(u(rng));
            std::memcpy(&kv[i], &h, 2);
        } else {
            const float f = u(rng);
            std::memcpy(&kv[i], &f, 4);
        }
    }
    std::vector<int32_t> read(static_cast<size_t>(cells));
    for (int64_t j = 0; j < cells; ++j) read[static_cast<size_t>(j)] = static_cast<int32_t>(j);
    std::vector<float> q(static_cast<size_t>(kHeads * kHd)), out(q.size());
    std::vector<float> pieces(static_cast<size_t>(parlance::attention_piece_floats(kHeads, kHd)));
    const int32_t visible[2] = {0, static_cast<int32_t>(cells)};
    for (float& v : q) v = u(rng);
    const size_t evict_bytes = size_t{256} << 20;
    const char* evict = bench::huge_buffer(evict_bytes);

    std::barrier sync(threads);
    std::vector<double> attend_ms, read_ms;
    unsigned long long sink = 0;
    auto worker = [&](int t) {
        bench::Lanes local{};
        for (int rep = 0; rep < 2 * reps; ++rep) {
            const bool attend = rep % 2 == 0;  // steps of both kinds in turn
            const size_t e0 = evict_bytes * t / threads, e1 = evict_bytes * (t + 1) / threads;
            if (!hot) local += bench::read_all(evict + e0, e1 - e0);
            sync.arrive_and_wait();
            const auto t0 = std::chrono::steady_clock::now();
            for (int l = 0; l < layers; ++l) {
                const char* k = kv.data() + 2 * l * layer_bytes;
                const char* v = k + layer_bytes;
                if (attend) {
                    parlance::PagedAttentionShape s{kHd,
                                                    kHeads,
                                                    kHeads / kKvHeads,
                                                    k,
                                                    v,
                                                    row,
                                                    row,
                                                    f16,
                                                    f16,
                                                    read.data(),
                                                    1.0f / std::sqrt(static_cast<float>(kHd))};
                    parlance::attend_pieces(s, q.data(), visible, 1, pieces.data(), t, threads);
                    sync.arrive_and_wait();
                    parlance::combine_pieces(kHeads, kHd, pieces.data(), visible, 1, out.data(), t, threads);
                } else {
                    const size_t b0 = layer_bytes * t / threads / 64 * 64;
                    const size_t b1 = t + 1 == threads ? layer_bytes : layer_bytes * (t + 1) / threads / 64 * 64;
                    local += bench::read_all(k + b0, b1 - b0) + bench::read_all(v + b0, b1 - b0);
                }
                sync.arrive_and_wait();
            }
            if (t == 0) {
                const double ms =
                    std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
                (attend ? attend_ms : read_ms).push_back(ms);
            }
        }
        sync.arrive_and_wait();
        if (t == 0) sink ^= bench::fold(local);
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(worker, t);
    worker(0);
    for (auto& t : pool) t.join();

    const double bytes = 2.0 * layers * static_cast<double>(layer_bytes);
    const double a = median(attend_ms), r = median(read_ms);
    std::printf(
        "{\"cells\":%lld,\"layers\":%d,\"threads\":%d,\"cache\":\"%s\",\"pieces\":%lld,\"hot\":%s,\"kv_mb\":%.1f,"
        "\"attend_ms\":%.3f,\"attend_gbs\":%.1f,\"read_ms\":%.3f,\"read_gbs\":%.1f,\"ratio\":%.2f,\"sink\":%g}\n",
        static_cast<long long>(cells), layers, threads, f16 ? "f16" : "f32",
        static_cast<long long>(parlance::attention_pieces(cells)), hot ? "true" : "false", bytes / 1e6, a,
        bytes / a / 1e6, r, bytes / r / 1e6, a / r, static_cast<double>(sink != 0));
}
