// How fast this machine streams memory, measured one way for every bench: threads reading their
// contiguous shares with 32-byte vector loads, from 2 MiB pages (as parlance's weights ask for),
// a 256 MiB stream between passes so that no pass starts with its buffer's tail in cache. Used by
// bench/read_floor.cpp (a model's weights read once: the floor under a decode step), parlance_bench
// --bandwidth (the Whisper table's floor) and paged_attention_bench (the cells' plain read).
// Header-only, no ggml: read_floor.cpp still builds alone (g++ -O2 -march=native -pthread).
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace bench {

using Lanes = unsigned long long __attribute__((vector_size(32)));

// A page-aligned buffer on 2 MiB pages where the kernel grants them, every page touched.
inline char* huge_buffer(size_t bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        std::fprintf(stderr, "cannot map %zu bytes\n", bytes);
        std::exit(1);
    }
    madvise(p, bytes, MADV_HUGEPAGE);
    std::memset(p, 1, bytes);
    return static_cast<char*>(p);
}

// Sum of [p, p + n) in four independent vector lanes (a tail under 32 bytes is not read).
inline Lanes read_all(const char* p, size_t n) {
    Lanes a{}, b{}, c{}, d{};
    size_t i = 0;
    for (; i + 128 <= n; i += 128) {
        Lanes x, y, z, w;
        std::memcpy(&x, p + i, 32);
        std::memcpy(&y, p + i + 32, 32);
        std::memcpy(&z, p + i + 64, 32);
        std::memcpy(&w, p + i + 96, 32);
        a += x, b += y, c += z, d += w;
    }
    for (; i + 32 <= n; i += 32) {
        Lanes x;
        std::memcpy(&x, p + i, 32);
        a += x;
    }
    return a + b + c + d;
}

// One number from a sum, so that the reads cannot be dropped.
inline unsigned long long fold(Lanes l) {
    return l[0] ^ l[1] ^ l[2] ^ l[3];
}

struct ReadTimes {
    double best_ms = 0, median_ms = 0;
    unsigned long long sink = 0;
};

// `passes` timed reads of `bytes` (rounded down to 128) by `threads` threads, each pass after the
// eviction stream; the clock runs from a barrier to a barrier.
inline ReadTimes time_streaming_read(size_t bytes, int threads, int passes) {
    bytes = bytes / 128 * 128;
    const size_t evict_bytes = size_t{256} << 20;
    char* data = huge_buffer(bytes);
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
            sink += read_all(data + lo, hi - lo);
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
    munmap(data, bytes);
    munmap(evict, evict_bytes);
    ReadTimes r;
    for (const Lanes& s : sinks) r.sink ^= fold(s);
    std::sort(ms.begin(), ms.end());
    r.best_ms = ms.front();
    r.median_ms = ms[ms.size() / 2];
    return r;
}

}  // namespace bench
