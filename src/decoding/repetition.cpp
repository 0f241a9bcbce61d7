// Repetition-loop detection (see repetition.h).
#include "decoding/repetition.h"

#include <algorithm>

namespace parlance {

size_t repetition_cut(std::span<const int> tokens, int min_repeats, int max_ngram) {
    const size_t n = tokens.size();
    size_t best = n;
    for (int g = 1; g <= max_ngram; ++g) {
        const size_t gram = static_cast<size_t>(g);
        if (gram * min_repeats > n) break;
        // Count how many times the last `gram` tokens repeat back to back at the end.
        size_t repeats = 1;
        while ((repeats + 1) * gram <= n &&
               std::equal(tokens.end() - gram, tokens.end(),
                          tokens.end() - (repeats + 1) * gram))
            ++repeats;
        if (repeats >= static_cast<size_t>(min_repeats)) best = std::min(best, n - (repeats - 1) * gram);
    }
    return best;
}

}  // namespace parlance
