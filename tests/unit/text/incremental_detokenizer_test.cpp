// Incremental detokenizer: never emits half a character; the pieces add up to decode(all).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "test_support.h"
#include "text/incremental_detokenizer.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace parlance {
namespace {

const Tokenizer& gpt2() {
    static const Tokenizer tok = Tokenizer::from_gguf(testing::assets_dir() / "ggml-vocab-gpt-2.gguf");
    return tok;
}

TEST(IncrementalDetokenizer, EmojiSplitAcrossTokensWaitsUntilComplete) {
    const std::string llama = "\xF0\x9F\xA6\x99";  // U+1F999, four bytes
    const auto ids = gpt2().encode(llama);
    ASSERT_GE(ids.size(), 2u) << "the test needs an emoji that GPT-2 splits";
    IncrementalDetokenizer detok(gpt2());
    std::string out;
    for (size_t i = 0; i + 1 < ids.size(); ++i) {
        EXPECT_EQ(detok.push(ids[i]), "") << "token " << i << " must not emit a partial character";
        EXPECT_GT(detok.pending_bytes(), 0u);
    }
    EXPECT_EQ(detok.push(ids.back()), llama);
    EXPECT_EQ(detok.pending_bytes(), 0u);
    EXPECT_EQ(detok.flush(), "");
}

TEST(IncrementalDetokenizer, PiecesAddUpToDecode) {
    const std::string text = "Streaming 🦙 text with 你好世界, emoji 😶‍🌫️ and accents é à — done.";
    const auto ids = gpt2().encode(text);
    IncrementalDetokenizer detok(gpt2());
    std::string out;
    for (int32_t id : ids) {
        const std::string piece = detok.push(id);
        EXPECT_EQ(utf8::valid_prefix(piece), piece.size()) << "piece is not well-formed UTF-8";
        out += piece;
    }
    out += detok.flush();
    EXPECT_EQ(out, gpt2().decode(ids));
    EXPECT_EQ(out, text);
}

TEST(IncrementalDetokenizer, IncompleteTailBecomesReplacementOnFlush) {
    IncrementalDetokenizer detok(gpt2());
    const auto ids = gpt2().encode("a\xF0\x9F\xA6\x99");
    ASSERT_GE(ids.size(), 3u);
    std::string out;
    for (size_t i = 0; i + 1 < ids.size(); ++i) out += detok.push(ids[i]);
    EXPECT_EQ(out, "a");
    EXPECT_EQ(detok.flush(), "\xEF\xBF\xBD");
    EXPECT_EQ(detok.pending_bytes(), 0u);
}

TEST(IncrementalDetokenizer, InvalidBytesAreReplacedRightAway) {
    IncrementalDetokenizer detok(gpt2());
    // A lone continuation byte can never become a character: replaced immediately.
    const auto ids = gpt2().encode(std::string("\x80x", 2));
    std::string out;
    for (int32_t id : ids) out += detok.push(id);
    EXPECT_EQ(out, "\xEF\xBF\xBDx");
    EXPECT_EQ(detok.flush(), "");
}

TEST(IncrementalDetokenizer, SkipsSpecialAndRejectsBadIds) {
    IncrementalDetokenizer detok(gpt2(), /*skip_special=*/true);
    EXPECT_EQ(detok.push(50256), "");  // <|endoftext|>
    EXPECT_THROW(detok.push(-3), Error);
    EXPECT_THROW(detok.push(static_cast<int32_t>(gpt2().vocab_size())), Error);
    IncrementalDetokenizer keep(gpt2());
    EXPECT_EQ(keep.push(50256), "<|endoftext|>");
}

TEST(Utf8, ScanRejectsOverlongSurrogatesAndTooLarge) {
    EXPECT_EQ(utf8::valid_prefix("\xC0\x80"), 0u);          // overlong NUL
    EXPECT_EQ(utf8::valid_prefix("\xED\xA0\x80"), 0u);      // surrogate
    EXPECT_EQ(utf8::valid_prefix("\xF4\x90\x80\x80"), 0u);  // > U+10FFFF
    EXPECT_EQ(utf8::valid_prefix("ab\xE2\x82"), 2u);        // truncated
    EXPECT_EQ(utf8::sanitize("a\xE2\x82z"), "a\xEF\xBF\xBDz");  // one U+FFFD per maximal subpart
    EXPECT_EQ(utf8::sanitize("\xE2\x82\xAC"), "\xE2\x82\xAC");
}

}  // namespace
}  // namespace parlance
