// Picks a sequence's next token from its logits: greedy (argmax, the lowest id on exact ties, as
// torch.argmax) or sampling with temperature, top-k and top-p. Randomness is counter-based: the
// draw for a sequence's k-th generated token depends only on (seed, k), so a result does not
// depend on which sequences shared its steps, on preemption or on chunking.
#pragma once

#include <cstdint>
#include <span>

#include "engine/sequence.h"

namespace parlance {

// `logits` (modified in place) is the row for the sequence's next token; `generated` is how many
// tokens it has generated so far. Stop ids are suppressed while generated < min_tokens.
int32_t sample_next(std::span<float> logits, const SamplingParams& p, int generated);

// The uniform draw in [0, 1) used for the k-th generated token under `seed`.
double sampling_uniform(uint64_t seed, int k);

}  // namespace parlance
