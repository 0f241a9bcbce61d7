// Where to cut long audio into pieces a model takes at once: near each limit, at the quietest
// 100 ms within the search span before it (Qwen3-ASR's toolkit rule, kept under the limit).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace parlance {

// Boundaries in samples of 16 kHz audio cut into pieces of at most max_seconds: first 0, last the
// length; each cut at the start of the lowest-energy 100 ms window (50 ms steps) of the
// search_seconds before the limit.
std::vector<size_t> quiet_cut_points(std::span<const float> pcm16k, double max_seconds, double search_seconds = 5.0);

}  // namespace parlance
