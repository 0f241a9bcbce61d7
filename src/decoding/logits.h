// Logit arithmetic shared by every decoding strategy, and the LogitsProcessor interface through
// which model-specific rules (Whisper's timestamp rules, suppressed tokens) plug into decoding.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <vector>

namespace parlance {

inline constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Index of the largest value (the first one on exact ties, as torch.argmax).
int argmax(std::span<const float> x);
// In-place log-softmax (computed in double for the normaliser).
void log_softmax(std::span<float> x);
// log(sum(exp(x))) over a span.
double logsumexp(std::span<const float> x);
// Difference between the largest and second-largest finite values (inf if fewer than two).
float top2_margin(std::span<const float> x);

// A rule applied to one sequence's logits before a token is chosen. `tokens` is the whole
// sequence so far (prompt included); `prompt_length` is where sampled tokens begin.
class LogitsProcessor {
public:
    virtual ~LogitsProcessor() = default;
    virtual void apply(std::span<float> logits, std::span<const int> tokens, int prompt_length) const = 0;
};

using ProcessorList = std::vector<std::shared_ptr<const LogitsProcessor>>;

void apply_processors(const ProcessorList& processors, std::span<float> logits,
                      std::span<const int> tokens, int prompt_length);

// Sets the listed tokens to -inf at every step.
class SuppressTokens : public LogitsProcessor {
public:
    explicit SuppressTokens(std::vector<int> ids) : ids_(std::move(ids)) {}
    void apply(std::span<float> logits, std::span<const int> tokens, int prompt_length) const override;

private:
    std::vector<int> ids_;
};

// Sets the listed tokens to -inf at the first sampled position only.
class SuppressTokensAtBegin : public LogitsProcessor {
public:
    SuppressTokensAtBegin(std::vector<int> ids, int begin_index) : ids_(std::move(ids)), begin_(begin_index) {}
    void apply(std::span<float> logits, std::span<const int> tokens, int prompt_length) const override;

private:
    std::vector<int> ids_;
    int begin_;
};

// Forbids end-of-sequence until `min_new_tokens` tokens have been sampled.
class MinNewTokens : public LogitsProcessor {
public:
    MinNewTokens(int eos, int min_new_tokens) : eos_(eos), min_(min_new_tokens) {}
    void apply(std::span<float> logits, std::span<const int> tokens, int prompt_length) const override;

private:
    int eos_;
    int min_;
};

}  // namespace parlance
