// ggml's own log messages. ggml prints everything it logs to stderr by default, its debug chatter
// included (ggml-cuda writes a line on every CUDA graph replay). Once installed (the first Backend
// does it), warnings and errors still go to stderr, debug lines are dropped, and the ones that say
// what ggml-cuda did with a step's CUDA graph are counted: whether the GPU replays kept step graphs
// or launches every kernel anew is what a decode step's cost depends on (docs/cuda.md).
#pragma once

#include <cstdint>

namespace parlance {

struct GpuGraphCounts {
    uint64_t captured = 0;  // warm-ups completed: a graph captured (again) for replay
    uint64_t reset = 0;     // a kept key's graph changed shape or place: launched afresh until stable
    // Replays of a graph computed again under the same allocation (the cheapest check). Replays
    // after a reallocation that left the graph unchanged are not logged, so not counted.
    uint64_t reused = 0;
};

// Idempotent and thread-safe; process-wide (ggml's logger is).
void install_ggml_messages();
GpuGraphCounts gpu_graph_counts();

// Counts one of ggml's messages (the installed callback's work; exposed for its test).
void count_ggml_message(const char* text);

}  // namespace parlance
