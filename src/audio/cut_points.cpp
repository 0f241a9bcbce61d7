// Cutting long audio at quiet points (see cut_points.h).
#include "audio/cut_points.h"

#include <limits>

namespace parlance {

std::vector<size_t> quiet_cut_points(std::span<const float> pcm, double max_seconds, double search_seconds) {
    constexpr size_t kRate = 16000, kWindow = kRate / 10;  // 100 ms
    const size_t max_len = static_cast<size_t>(max_seconds * kRate);
    const size_t search = static_cast<size_t>(search_seconds * kRate);
    std::vector<size_t> cuts = {0};
    size_t at = 0;
    while (pcm.size() - at > max_len) {
        const size_t limit = at + max_len;
        const size_t from = limit > search + at + kWindow ? limit - search : at + kWindow;
        size_t best = limit;
        double best_energy = std::numeric_limits<double>::infinity();
        for (size_t s = from; s + kWindow <= limit; s += kWindow / 2) {
            double e = 0;
            for (size_t i = s; i < s + kWindow; ++i) e += static_cast<double>(pcm[i]) * pcm[i];
            if (e < best_energy) best_energy = e, best = s;
        }
        cuts.push_back(best);
        at = best;
    }
    cuts.push_back(pcm.size());
    return cuts;
}

}  // namespace parlance
