// The real Qwen3 tokenizer.json: exact ids (from the json itself and from HF-generated vectors),
// special tokens, round trips, thread safety, and a throughput measurement.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "test_support.h"
#include "text/tokenizer.h"

namespace parlance {
namespace {

class Qwen3 : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        tok_ = std::make_unique<Tokenizer>(
            Tokenizer::from_json_file(testing::assets_dir() / "qwen3" / "tokenizer.json"));
    }
    static void TearDownTestSuite() { tok_.reset(); }
    static const Tokenizer& tok() { return *tok_; }
    static int32_t id(std::string_view text) {
        const auto found = tok_->token_to_id(text);
        EXPECT_TRUE(found.has_value()) << text;
        return found.value_or(-1);
    }

private:
    static inline std::unique_ptr<Tokenizer> tok_;
};

using Ids = std::vector<int32_t>;

TEST_F(Qwen3, VocabularyAndSpecialTokens) {
    // 151643 BPE tokens + 26 added tokens (ids from the json's added_tokens).
    EXPECT_EQ(tok().vocab_size(), 151669u);
    EXPECT_EQ(tok().token_to_id("<|endoftext|>"), 151643);
    EXPECT_EQ(tok().token_to_id("<|im_start|>"), 151644);
    EXPECT_EQ(tok().token_to_id("<|im_end|>"), 151645);
    EXPECT_EQ(tok().token_to_id("<think>"), 151667);
    EXPECT_TRUE(tok().is_special(151644));
    EXPECT_FALSE(tok().is_special(151667));  // "special": false in the json
    EXPECT_FALSE(tok().is_special(9707));
    EXPECT_FALSE(tok().is_special(-1));
    EXPECT_EQ(tok().id_to_token(1879), "Ġworld");
    EXPECT_EQ(tok().token_bytes(1879), " world");
    EXPECT_EQ(tok().id_to_token(151645), "<|im_end|>");
}

TEST_F(Qwen3, ExactIds) {
    EXPECT_EQ(tok().encode("Hello world"), (Ids{9707, 1879}));
    // Qwen's pre-tokenizer isolates every digit.
    EXPECT_EQ(tok().encode("12345"), (Ids{16, 17, 18, 19, 20}));
    EXPECT_EQ(tok().encode("\n\n"), (Ids{271}));
    EXPECT_EQ(tok().encode("<|im_start|>user\nhi<|im_end|>", true), (Ids{151644, 872, 198, 6023, 151645}));
    // Without parse_special the markers are plain text and never become the special ids.
    const Ids plain = tok().encode("<|im_start|>user\nhi<|im_end|>", false);
    for (int32_t t : plain) EXPECT_FALSE(tok().is_special(t));
    EXPECT_EQ(tok().decode(plain), "<|im_start|>user\nhi<|im_end|>");
    // Non-special added tokens are always matched (HF behaviour).
    EXPECT_EQ(tok().encode("<think>", false), (Ids{151667}));
    EXPECT_EQ(tok().encode("a<think>b", false), (Ids{id("a"), 151667, id("b")}));
    // Longest match: "<tool_call>" not "<tool_call" + ">".
    EXPECT_EQ(tok().encode("<tool_call></tool_call>"), (Ids{151657, 151658}));
}

TEST_F(Qwen3, MatchesQwen2VectorsFromHf) {
    // Qwen2 and Qwen3 share the BPE (same vocabulary and merges), so the HF-generated qwen2
    // vectors are exact expectations for the Qwen3 tokenizer.json as well.
    const auto dir = testing::assets_dir();
    const std::string inp = testing::read_file(dir / "ggml-vocab-qwen2.gguf.inp");
    const Tokenizer gguf = Tokenizer::from_gguf(dir / "ggml-vocab-qwen2.gguf");
    const std::string sep = "\n__ggml_vocab_test__\n";
    size_t checked = 0;
    for (size_t pos = 0; pos < inp.size();) {
        size_t next = inp.find(sep, pos);
        if (next == std::string::npos) next = inp.size();
        const std::string s = inp.substr(pos, next - pos);
        EXPECT_EQ(tok().encode(s), gguf.encode(s)) << "[" << s << "]";
        EXPECT_EQ(tok().decode(tok().encode(s)), s);
        ++checked;
        pos = next + sep.size();
    }
    EXPECT_GT(checked, 30u);
}

TEST_F(Qwen3, RoundTrips) {
    const std::vector<std::string> texts = {
        "Hello, world! How are you doing today?",
        "你好，世界！今天天气很好。我们去公园散步吧。",
        "日本語のテキストも大丈夫です。",
        "Emoji: 🦙🚀😶‍🌫️✅ 👨‍👩‍👧‍👦",
        "def foo(x):\n    return x ** 2  # square\n\n\tprint(foo(3))\n",
        "Numbers: 12345, 3.14159, -42, 1e10, 0x1F",
        "I've been told he's there; 'RE you sure? We'Ve a'lL I'D",
        "   leading and trailing spaces   ",
        "tabs\t\tand\r\nwindows\r\nnewlines\n\n\n",
        "Ünïcödé àccénts — and “quotes” «guillemets»",
        "مرحبا بالعالم",
        "Привет, мир!",
        "",
    };
    for (const std::string& t : texts) {
        const Ids ids = tok().encode(t);
        EXPECT_EQ(tok().decode(ids), t) << t;
        EXPECT_LE(ids.size(), t.size()) << t;
    }
    EXPECT_TRUE(tok().encode("").empty());
    // Digits stay one per token inside text too.
    const Ids n = tok().encode("abc 2024");
    const Ids tail(n.end() - 4, n.end());
    EXPECT_EQ(tail, (Ids{id("2"), id("0"), id("2"), id("4")}));
}

TEST_F(Qwen3, NfcNormalization) {
    // "e" + COMBINING ACUTE ACCENT is normalized to the precomposed "é" before BPE.
    EXPECT_EQ(tok().encode("caf\x65\xCC\x81"), tok().encode("caf\xC3\xA9"));
    EXPECT_EQ(tok().decode(tok().encode("caf\x65\xCC\x81")), "caf\xC3\xA9");
}

TEST_F(Qwen3, InvalidUtf8BecomesByteTokens) {
    const std::string bad = std::string("ok \xFF\xC3 end \xE2\x82", 12);
    const Ids ids = tok().encode(bad);
    EXPECT_EQ(tok().decode(ids), bad);  // lossless
    const std::string lone(1, '\x80');
    EXPECT_EQ(tok().encode(lone), (Ids{id("Ģ") /* byte 0x80 in byte-level form */}));
}

TEST_F(Qwen3, SkipSpecialInDecode) {
    const Ids ids = tok().encode("<|im_start|>user\nhi<|im_end|>", true);
    EXPECT_EQ(tok().decode(ids, true), "user\nhi");
    EXPECT_EQ(tok().decode(ids, false), "<|im_start|>user\nhi<|im_end|>");
}

TEST_F(Qwen3, ConcurrentEncodeIsConsistent) {
    std::string text;
    for (int i = 0; i < 50; ++i) text += "Thread " + std::to_string(i) + " says 你好 and 🦙 ";
    const Ids expected = tok().encode(text);
    std::vector<std::thread> threads;
    std::vector<int> ok(4, 0);
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            int good = 0;
            for (int r = 0; r < 20; ++r) good += tok().encode(text) == expected;
            ok[t] = good;
        });
    }
    for (auto& th : threads) th.join();
    for (int good : ok) EXPECT_EQ(good, 20);
}

// A megabyte of mixed English/Chinese/code text, distinct words so the cache does not do all the
// work: it round-trips (a quadratic pre-tokenizer would show as this test's ctest timeout; speed is
// for benchmarks, not tests).
TEST_F(Qwen3, AMegabyteOfMixedTextRoundTrips) {
    std::string text;
    for (int i = 0; text.size() < (1 << 20); ++i) {
        text += "Request " + std::to_string(i * 7919) + ": the quick brown fox jumps over the lazy dog w" +
                std::to_string(i) + "x. 我们今天讨论第" + std::to_string(i) + "个问题。\n    if (x_" +
                std::to_string(i) + " > 0) { return y; }\n";
    }
    const Ids ids = tok().encode(text);
    EXPECT_GT(ids.size(), text.size() / 8);
    EXPECT_EQ(tok().decode(ids), text);
}

}  // namespace
}  // namespace parlance
