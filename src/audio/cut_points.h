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
// The length of the first piece of `pcm` (audio from a piece's start on): all of it when it is
// at most max_seconds long, else the cut's offset. Only the first max_seconds and one sample are
// read, so a reader that decodes as it goes needs no more than that ahead.
size_t quiet_piece_length(std::span<const float> pcm, double max_seconds, double search_seconds = 5.0);

std::vector<size_t> quiet_cut_points(std::span<const float> pcm16k, double max_seconds, double search_seconds = 5.0);

}  // namespace parlance
