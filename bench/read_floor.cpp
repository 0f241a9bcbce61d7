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
// Standalone on purpose (no ggml, no parlance): g++ -O2 -march=native -pthread read_floor.cpp; the
// measurement itself is bench/read_speed.h's, which the other benches share.
#include <cstdio>
#include <cstdlib>

#include "read_speed.h"

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: read_floor BYTES [THREADS] [PASSES]\n");
        return 2;
    }
    const size_t bytes = std::strtoull(argv[1], nullptr, 10) / 128 * 128;
    const int threads = argc > 2 ? std::max(1, std::atoi(argv[2])) : 1;
    const int passes = argc > 3 ? std::max(1, std::atoi(argv[3])) : 7;
    if (bytes < 128u * threads) {
        std::fprintf(stderr, "read_floor: BYTES too small\n");
        return 2;
    }
    const bench::ReadTimes r = bench::time_streaming_read(bytes, threads, passes);
    std::printf("{\"bytes\":%zu,\"threads\":%d,\"best_ms\":%.2f,\"median_ms\":%.2f,\"best_gbs\":%.1f,\"sink\":%d}\n",
                bytes, threads, r.best_ms, r.median_ms, static_cast<double>(bytes) / r.best_ms / 1e6,
                r.sink == 42 ? 1 : 0);
    return 0;
}
