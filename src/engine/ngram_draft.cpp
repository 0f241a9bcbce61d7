// ngram_draft (see ngram_draft.h).
#include "engine/ngram_draft.h"

#include <algorithm>

namespace parlance {

std::vector<int32_t> ngram_draft(std::span<const int32_t> tokens, int max_draft, int max_n, int min_n) {
    const int len = static_cast<int>(tokens.size());
    if (max_draft <= 0) return {};
    for (int n = std::min(max_n, len - 1); n >= std::max(1, min_n); --n) {
        const auto suffix = tokens.subspan(len - n);
        // The most recent earlier match (ending before the suffix itself).
        for (int at = len - n - 1; at >= 0; --at) {
            if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + at)) continue;
            const int from = at + n, count = std::min(max_draft, len - from);
            if (count <= 0) continue;
            return std::vector<int32_t>(tokens.begin() + from, tokens.begin() + from + count);
        }
    }
    return {};
}

}  // namespace parlance
