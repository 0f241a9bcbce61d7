// Cutting long audio at quiet points (see cut_points.h).
#include "audio/cut_points.h"

#include <limits>

namespace parlance {

size_t quiet_piece_length(std::span<const float> pcm, double max_seconds, double search_seconds) {
    constexpr size_t kRate = 16000, kWindow = kRate / 10;  // 100 ms
    const size_t max_len = static_cast<size_t>(max_seconds * kRate);
    const size_t search = static_cast<size_t>(search_seconds * kRate);
    if (pcm.size() <= max_len) return pcm.size();
    const size_t from = max_len > search + kWindow ? max_len - search : kWindow;
    size_t best = max_len;
    double best_energy = std::numeric_limits<double>::infinity();
    for (size_t s = from; s + kWindow <= max_len; s += kWindow / 2) {
        double e = 0;
        for (size_t i = s; i < s + kWindow; ++i) e += static_cast<double>(pcm[i]) * pcm[i];
        if (e < best_energy) best_energy = e, best = s;
    }
    return best;
}

std::vector<size_t> quiet_cut_points(std::span<const float> pcm, double max_seconds, double search_seconds) {
    std::vector<size_t> cuts = {0};
    size_t at = 0;
    while (at < pcm.size()) {
        at += quiet_piece_length(pcm.subspan(at), max_seconds, search_seconds);
        cuts.push_back(at);
    }
    if (cuts.size() == 1) cuts.push_back(0);  // empty audio: one empty piece, as before
    return cuts;
}

}  // namespace parlance
