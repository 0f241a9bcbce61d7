// Prompt-lookup drafts for speculative decoding: the tokens that followed the most recent earlier
// occurrence of the sequence's last n tokens (n from `max_n` down to `min_n`), up to `max_draft`
// of them. Free to compute (no draft model); strong wherever output repeats its input (quoting,
// summaries, code edits, transcripts).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace parlance {

std::vector<int32_t> ngram_draft(std::span<const int32_t> tokens, int max_draft, int max_n = 3, int min_n = 1);

}  // namespace parlance
