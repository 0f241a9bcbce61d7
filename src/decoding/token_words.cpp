#include "decoding/token_words.h"

#include <cmath>
#include <string>

namespace parlance {
namespace {

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

}  // namespace

std::vector<Word> words_with_probabilities(const Tokenizer& tokenizer, std::span<const int32_t> tokens,
                                           std::span<const float> logprobs, std::string_view text) {
    std::vector<Word> words;
    if (tokens.size() != logprobs.size() || text.empty()) return words;
    // Each token's first byte in the decoded output (special tokens decode to nothing).
    std::string decoded;
    std::vector<size_t> begin(tokens.size() + 1);
    for (size_t i = 0; i < tokens.size(); ++i) {
        begin[i] = decoded.size();
        decoded += tokenizer.decode(tokens.subspan(i, 1), /*skip_special=*/true);
    }
    begin[tokens.size()] = decoded.size();
    const size_t at = decoded.rfind(text);
    if (at == std::string::npos) return words;

    size_t first_token = 0;  // tokens before it end before the word being placed
    for (size_t b = 0; b < text.size();) {
        while (b < text.size() && is_space(text[b])) ++b;
        if (b == text.size()) break;
        size_t e = b;
        while (e < text.size() && !is_space(text[e])) ++e;
        const size_t from = at + b, to = at + e;  // the word's bytes in `decoded`
        while (first_token < tokens.size() && begin[first_token + 1] <= from) ++first_token;
        double sum = 0.0;
        int n = 0;
        for (size_t i = first_token; i < tokens.size() && begin[i] < to; ++i)
            if (begin[i + 1] > begin[i]) {
                sum += std::exp(static_cast<double>(logprobs[i]));
                ++n;
            }
        Word w;
        if (b > 0) w.word = " ";  // as Whisper's words: the space before a word leads it
        w.word.append(text.substr(b, e - b));
        w.probability = n > 0 ? static_cast<float>(sum / n) : 0.0f;
        words.push_back(std::move(w));
        b = e;
    }
    return words;
}

}  // namespace parlance
