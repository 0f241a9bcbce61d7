// Logit arithmetic and the generic processors (see logits.h).
#include "decoding/logits.h"

#include <algorithm>
#include <cmath>

namespace parlance {

int argmax(std::span<const float> x) {
    // The same index as `if (x[i] > x[best]) best = i` over the row, in two passes without its
    // chain from each comparison to the next load (a 151,936-token row: ~0.6 ms a decode step
    // became ~0.05): the largest value over eight independent lanes, then its first index. NaNs
    // are passed over as that loop passes over them; a NaN first value wins, as it does there.
    if (x.empty() || std::isnan(x[0])) return 0;
    constexpr size_t kLanes = 8;
    float lane[kLanes];
    std::fill(lane, lane + kLanes, kNegInf);
    size_t i = 0;
    for (; i + kLanes <= x.size(); i += kLanes)
        for (size_t l = 0; l < kLanes; ++l) lane[l] = std::max(lane[l], x[i + l]);
    for (; i < x.size(); ++i) lane[0] = std::max(lane[0], x[i]);
    const float m = *std::max_element(lane, lane + kLanes);
    for (i = 0; i < x.size(); ++i)
        if (x[i] == m) return static_cast<int>(i);
    return 0;  // every value NaN
}

double logsumexp(std::span<const float> x) {
    float m = kNegInf;
    for (float v : x) m = std::max(m, v);
    if (m == kNegInf) return m;
    double s = 0.0;
    for (float v : x) s += std::exp(static_cast<double>(v) - m);
    return m + std::log(s);
}

void log_softmax(std::span<float> x) {
    double lse = logsumexp(x);
    for (float& v : x) v = static_cast<float>(v - lse);
}

float top2_margin(std::span<const float> x) {
    float a = kNegInf, b = kNegInf;
    for (float v : x) {
        if (v > a) {
            b = a;
            a = v;
        } else if (v > b) {
            b = v;
        }
    }
    return (b == kNegInf) ? std::numeric_limits<float>::infinity() : a - b;
}

void apply_processors(const ProcessorList& processors, std::span<float> logits, std::span<const int> tokens,
                      int prompt_length) {
    for (const auto& p : processors) p->apply(logits, tokens, prompt_length);
}

void SuppressTokens::apply(std::span<float> logits, std::span<const int>, int) const {
    for (int id : ids_)
        if (id >= 0 && static_cast<size_t>(id) < logits.size()) logits[id] = kNegInf;
}

void SuppressTokensAtBegin::apply(std::span<float> logits, std::span<const int> tokens, int) const {
    if (static_cast<int>(tokens.size()) != begin_) return;
    for (int id : ids_)
        if (id >= 0 && static_cast<size_t>(id) < logits.size()) logits[id] = kNegInf;
}

void MinNewTokens::apply(std::span<float> logits, std::span<const int> tokens, int prompt_length) const {
    if (static_cast<int>(tokens.size()) - prompt_length < min_ && eos_ >= 0 &&
        static_cast<size_t>(eos_) < logits.size())
        logits[eos_] = kNegInf;
}

}  // namespace parlance
