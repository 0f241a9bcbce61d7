// Token selection (see sampler.h).
#include "engine/sampler.h"

#include "decoding/logits.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace parlance {
namespace {

uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

}  // namespace

double sampling_uniform(uint64_t seed, int k) {
    const uint64_t r = splitmix64(splitmix64(seed) ^ (static_cast<uint64_t>(k) * 0xD1B54A32D192ED03ULL));
    return static_cast<double>(r >> 11) * (1.0 / 9007199254740992.0);  // 53 bits
}

namespace {

void apply_penalties(std::span<float> logits, const SamplingParams& p, std::span<const int32_t> tokens,
                     int prompt_length) {
    const auto in_vocab = [&](int32_t id) { return id >= 0 && static_cast<size_t>(id) < logits.size(); };
    if (p.repetition_penalty != 1.0f) {
        std::vector<int32_t> seen(tokens.begin(), tokens.end());
        std::sort(seen.begin(), seen.end());
        seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
        for (int32_t id : seen) {
            if (!in_vocab(id)) continue;
            float& x = logits[id];
            x = x > 0 ? x / p.repetition_penalty : x * p.repetition_penalty;
        }
    }
    if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
        std::vector<int32_t> gen(tokens.begin() + std::min<size_t>(prompt_length, tokens.size()), tokens.end());
        std::sort(gen.begin(), gen.end());
        for (size_t i = 0; i < gen.size();) {
            size_t j = i;
            while (j < gen.size() && gen[j] == gen[i]) ++j;
            if (in_vocab(gen[i]))
                logits[gen[i]] -= p.frequency_penalty * static_cast<float>(j - i) + p.presence_penalty;
            i = j;
        }
    }
}

}  // namespace

int32_t sample_next(std::span<float> logits, const SamplingParams& p, std::span<const int32_t> tokens,
                    int prompt_length) {
    const float neg_inf = -std::numeric_limits<float>::infinity();
    const int generated = static_cast<int>(tokens.size()) - prompt_length;
    apply_penalties(logits, p, tokens, prompt_length);
    if (generated < p.min_tokens)
        for (int32_t id : p.stop_ids)
            if (id >= 0 && static_cast<size_t>(id) < logits.size()) logits[id] = neg_inf;
    if (p.temperature <= 0.0f) return argmax(logits);

    // Candidates by descending logit (ties: lower id first), cut by top-k, then softmax at the
    // temperature, then the top-p nucleus.
    std::vector<int32_t> idx(logits.size());
    std::iota(idx.begin(), idx.end(), 0);
    const size_t k = p.top_k > 0 ? std::min<size_t>(p.top_k, idx.size()) : idx.size();
    auto by_logit = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), by_logit);
    idx.resize(k);
    const double m = logits[idx[0]];
    std::vector<double> prob(k);
    double sum = 0.0;
    for (size_t i = 0; i < k; ++i) {
        prob[i] = logits[idx[i]] == neg_inf ? 0.0 : std::exp((logits[idx[i]] - m) / p.temperature);
        sum += prob[i];
    }
    size_t keep = k;
    if (p.min_p > 0.0f) {
        // prob[0] is the most likely candidate's (unnormalised) probability.
        size_t n = 1;
        while (n < k && prob[n] >= p.min_p * prob[0]) ++n;
        keep = n;
        sum = 0.0;
        for (size_t i = 0; i < keep; ++i) sum += prob[i];
    }
    if (p.top_p < 1.0f) {
        double cum = 0.0;
        for (size_t i = 0; i < keep; ++i) {
            cum += prob[i] / sum;
            if (cum >= p.top_p) {
                keep = i + 1;
                break;
            }
        }
    }
    double total = 0.0;
    for (size_t i = 0; i < keep; ++i) total += prob[i];
    const double u = sampling_uniform(p.seed, generated) * total;
    double acc = 0.0;
    for (size_t i = 0; i < keep; ++i) {
        acc += prob[i];
        if (u < acc) return idx[i];
    }
    return idx[keep - 1];
}

}  // namespace parlance
