// Token selection (see sampler.h).
#include "engine/sampler.h"

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

int32_t first_argmax(std::span<const float> x) {
    int32_t best = 0;
    for (size_t i = 1; i < x.size(); ++i)
        if (x[i] > x[best]) best = static_cast<int32_t>(i);
    return best;
}

}  // namespace

double sampling_uniform(uint64_t seed, int k) {
    const uint64_t r = splitmix64(splitmix64(seed) ^ (static_cast<uint64_t>(k) * 0xD1B54A32D192ED03ULL));
    return static_cast<double>(r >> 11) * (1.0 / 9007199254740992.0);  // 53 bits
}

int32_t sample_next(std::span<float> logits, const SamplingParams& p, int generated) {
    const float neg_inf = -std::numeric_limits<float>::infinity();
    if (generated < p.min_tokens)
        for (int32_t id : p.stop_ids)
            if (id >= 0 && static_cast<size_t>(id) < logits.size()) logits[id] = neg_inf;
    if (p.temperature <= 0.0f) return first_argmax(logits);

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
    if (p.top_p < 1.0f) {
        double cum = 0.0;
        for (size_t i = 0; i < k; ++i) {
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
