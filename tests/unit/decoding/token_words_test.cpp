// The words of an audio LM's transcription with their tokens' probabilities: each word the mean
// probability of the tokens spelling it, the transcription found after the model's own prefix, and
// no words at all where the text is not what the tokens say.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "decoding/token_words.h"
#include "text/tokenizer.h"

namespace parlance {
namespace {

// ids: 0 "language", 1 " English", 2 "<asr_text>", 3 "The", 4 " qu", 5 "ick", 6 " brown", 7 " fox",
// 8 ".", 9 "English", 10 " caf", 11 "\xc3", 12 "\xa9", 13 "s and", 14 " dog", 15 <|im_end|> (special).
Tokenizer vocabulary() {
    Tokenizer t = Tokenizer::from_ranked_bytes({"language", " English", "<asr_text>", "The", " qu", "ick", " brown",
                                                " fox", ".", "English", " caf", "\xc3", "\xa9", "s and", " dog"});
    t.add_special_token("<|im_end|>", 15);
    return t;
}

std::vector<float> logs(const std::vector<double>& probabilities) {
    std::vector<float> out;
    for (double p : probabilities) out.push_back(static_cast<float>(std::log(p)));
    return out;
}

TEST(TokenWords, EachWordIsTheMeanProbabilityOfItsTokens) {
    const Tokenizer tok = vocabulary();
    const std::vector<int32_t> ids = {0, 1, 2, 3, 4, 5, 6, 7, 8, 15};
    const auto words = words_with_probabilities(tok, ids, logs({0.99, 0.98, 0.97, 0.9, 0.5, 0.7, 0.8, 0.3, 0.9, 0.1}),
                                                "The quick brown fox.");
    ASSERT_EQ(words.size(), 4u);
    const std::vector<std::string> text = {"The", " quick", " brown", " fox."};
    const std::vector<double> want = {0.9, 0.6, 0.8, 0.6};  // the stop token spells nothing
    for (size_t i = 0; i < words.size(); ++i) {
        EXPECT_EQ(words[i].word, text[i]);
        EXPECT_NEAR(words[i].probability, want[i], 1e-6) << text[i];
        EXPECT_EQ(words[i].start, 0.0);
        EXPECT_EQ(words[i].end, 0.0);
    }
}

// "English" is also the language the prefix names: the word is the transcription's token.
TEST(TokenWords, TheTextIsPlacedWhereItEndsTheOutput) {
    const Tokenizer tok = vocabulary();
    const auto words = words_with_probabilities(tok, std::vector<int32_t>{0, 1, 2, 9, 15},
                                                logs({0.99, 0.1, 0.97, 0.95, 0.5}), "English");
    ASSERT_EQ(words.size(), 1u);
    EXPECT_NEAR(words[0].probability, 0.95, 1e-6);
}

// A token across a word boundary counts for both words; a character split across tokens counts
// each of its tokens once.
TEST(TokenWords, TokensAcrossBoundariesCountForEveryWordTheyTouch) {
    const Tokenizer tok = vocabulary();
    const auto words = words_with_probabilities(tok, std::vector<int32_t>{10, 11, 12, 7, 13, 14},
                                                logs({0.9, 0.6, 0.3, 0.5, 0.2, 0.8}), "café foxs and dog");
    ASSERT_EQ(words.size(), 4u);
    EXPECT_EQ(words[0].word, "café");
    EXPECT_NEAR(words[0].probability, (0.9 + 0.6 + 0.3) / 3, 1e-6);
    EXPECT_EQ(words[1].word, " foxs");
    EXPECT_NEAR(words[1].probability, (0.5 + 0.2) / 2, 1e-6);
    EXPECT_EQ(words[2].word, " and");
    EXPECT_NEAR(words[2].probability, 0.2, 1e-6);
    EXPECT_EQ(words[3].word, " dog");
    EXPECT_NEAR(words[3].probability, 0.8, 1e-6);
}

// A parser that rewrote the output (a collapsed loop) or probabilities that do not match the
// tokens: no words, so a gate reading them commits nothing.
TEST(TokenWords, TextTheTokensDoNotSayHasNoWords) {
    const Tokenizer tok = vocabulary();
    const std::vector<int32_t> ids = {3, 7, 7, 7};
    EXPECT_TRUE(words_with_probabilities(tok, ids, logs({0.9, 0.9, 0.9, 0.9}), "The brown fox").empty());
    EXPECT_TRUE(words_with_probabilities(tok, ids, logs({0.9, 0.9, 0.9}), "The fox fox fox").empty());
    EXPECT_EQ(words_with_probabilities(tok, ids, logs({0.9, 0.9, 0.9, 0.9}), "The fox fox fox").size(), 4u);
    EXPECT_TRUE(words_with_probabilities(tok, ids, logs({0.9, 0.9, 0.9, 0.9}), "").empty());
}

}  // namespace
}  // namespace parlance
