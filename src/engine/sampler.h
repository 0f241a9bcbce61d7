// Picks a sequence's next token from its logits: penalties first (repetition, then frequency and
// presence, as vLLM orders them), then greedy (argmax, the lowest id on exact ties, as
// torch.argmax) or sampling with temperature, top-k, top-p and min-p. Randomness is counter-based: the
// draw for a sequence's k-th generated token depends only on (seed, k), so a result does not
// depend on which sequences shared its steps, on preemption or on chunking.
#pragma once

#include <cstdint>
#include <span>

#include "engine/sequence.h"

namespace parlance {

// `logits` (modified in place) is the row for the sequence's next token; `tokens` are its prompt
// and generated tokens so far, the first `prompt_length` of them the prompt. Stop ids are
// suppressed while fewer than min_tokens were generated.
int32_t sample_next(std::span<float> logits, const SamplingParams& p, std::span<const int32_t> tokens,
                    int prompt_length);

// The uniform draw in [0, 1) used for the k-th generated token under `seed`.
double sampling_uniform(uint64_t seed, int k);

}  // namespace parlance
