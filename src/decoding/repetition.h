// Hallucination guard: detects a decoding that fell into a loop (the same n-gram repeated at the
// end of the output) so the caller can cut it back to one occurrence.
#pragma once

#include <span>
#include <vector>

namespace parlance {

// If `tokens` ends with some n-gram (1 <= n <= max_ngram) repeated at least `min_repeats` times
// in a row, returns the length to keep (up to and including its first occurrence); otherwise
// returns tokens.size(). Only tokens for which is_content(id) is true take part (timestamps and
// control tokens are ignored when they are passed as not content).
size_t repetition_cut(std::span<const int> tokens, int min_repeats = 4, int max_ngram = 16);

}  // namespace parlance
