// The least time this machine takes to read a model's weights once: the floor under any exact
// decode step of one sequence, which multiplies every weight once (the output head included) and
// so must bring all of them from memory — whatever the program. THREADS threads read BYTES with
// 32-byte vector loads, each its contiguous share (as the weight products split their rows), from
// 2 MiB pages (as parlance's weights ask for); a 256 MiB stream between passes so that no pass
// starts with the weights' tail in cache. bench/qwen3_asr_bench.sh runs it beside its decode rows,
// so a decode time reads against the floor measured in the same minutes.
//
//   read_floor BYTES [THREADS=1] [PASSES=7]
// prints {"bytes":…,"threads":…,"best_ms":…,"median_ms":…,"best_gbs":…}.
// Standalone on purpose (no ggml, no parlance): g++ -O2 -march=native -pthread read_floor.cpp.
#include <sys/mman.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

using Lanes = unsigned long long __attribute__((vector_size(32)));

// A page-aligned buffer on 2 MiB pages where the kernel grants them, every page touched.
char* huge_buffer(size_t bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        std::fprintf(stderr, "read_floor: cannot map %zu bytes\n", bytes);
        std::exit(1);
    }
    madvise(p, bytes, MADV_HUGEPAGE);
    std::memset(p, 1, bytes);
    return static_cast<char*>(p);
}

// Sum of [p, p + n) in four independent vector lanes (n a multiple of 128).
Lanes read_all(const char* p, size_t n) {
    Lanes a{}, b{}, c{}, d{};
    for (size_t i = 0; i < n; i += 128) {
        Lanes x, y, z, w;
        std::memcpy(&x, p + i, 32);
        std::memcpy(&y, p + i + 32, 32);
        std::memcpy(&z, p + i + 64, 32);
        std::memcpy(&w, p + i + 96, 32);
        a += x, b += y, c += z, d += w;
    }
    return a + b + c + d;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: read_floor BYTES [THREADS] [PASSES]\n");
        return 2;
    }
    const size_t bytes = std::strtoull(argv[1], nullptr, 10) / 128 * 128;
    const int threads = argc > 2 ? std::max(1, std::atoi(argv[2])) : 1;
    const int passes = argc > 3 ? std::max(1, std::atoi(argv[3])) : 7;
    const size_t evict_bytes = size_t{256} << 20;
    if (bytes < 128u * threads) {
        std::fprintf(stderr, "read_floor: BYTES too small\n");
        return 2;
    }
    char* weights = huge_buffer(bytes);
    char* evict = huge_buffer(evict_bytes);

    std::vector<double> ms;
    std::vector<Lanes> sinks(static_cast<size_t>(threads));
    std::barrier sync(threads);
    auto worker = [&](int t) {
        const size_t lo = bytes * t / threads / 128 * 128;
        const size_t hi = t + 1 == threads ? bytes : bytes * (t + 1) / threads / 128 * 128;
        const size_t elo = evict_bytes * t / threads / 128 * 128;
        const size_t ehi = t + 1 == threads ? evict_bytes : evict_bytes * (t + 1) / threads / 128 * 128;
        Lanes sink{};
        for (int pass = 0; pass < passes; ++pass) {
            sink += read_all(evict + elo, ehi - elo);
            sync.arrive_and_wait();
            const auto t0 = std::chrono::steady_clock::now();
            sink += read_all(weights + lo, hi - lo);
            sync.arrive_and_wait();
            if (t == 0)
                ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
        sinks[static_cast<size_t>(t)] = sink;
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(worker, t);
    worker(0);
    for (auto& t : pool) t.join();

    unsigned long long keep = 0;
    for (const Lanes& s : sinks) keep ^= s[0] ^ s[1] ^ s[2] ^ s[3];
    std::sort(ms.begin(), ms.end());
    const double best = ms.front(), median = ms[ms.size() / 2];
    std::printf("{\"bytes\":%zu,\"threads\":%d,\"best_ms\":%.2f,\"median_ms\":%.2f,\"best_gbs\":%.1f,\"sink\":%d}\n",
                bytes, threads, best, median, static_cast<double>(bytes) / best / 1e6, keep == 42 ? 1 : 0);
    return 0;
}
