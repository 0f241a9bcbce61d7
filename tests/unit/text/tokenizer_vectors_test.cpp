// Tokenizer against llama.cpp's ggml-vocab test vectors (generated with HF tokenizers), and the
// ranked-bytes (whisper.cpp style) construction against the same GPT-2 vectors.
#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "test_support.h"
#include "text/tokenizer.h"

namespace parlance {
namespace {

struct Vector {
    std::string input;
    std::vector<int32_t> ids;
};

// .inp: inputs separated by "\n__ggml_vocab_test__\n" (the file ends with that separator, so the
// trailing newline of the last input belongs to the separator). .out: one line of ids per input.
std::vector<Vector> read_vectors(const std::string& name) {
    const auto dir = testing::assets_dir();
    const std::string inp = testing::read_file(dir / (name + ".inp"));
    const std::string out = testing::read_file(dir / (name + ".out"));
    const std::string sep = "\n__ggml_vocab_test__\n";
    std::vector<std::string> inputs;
    for (size_t pos = 0; pos < inp.size();) {
        const size_t next = inp.find(sep, pos);
        if (next == std::string::npos) {
            inputs.push_back(inp.substr(pos));
            break;
        }
        inputs.push_back(inp.substr(pos, next - pos));
        pos = next + sep.size();
    }
    std::vector<Vector> vectors;
    std::istringstream lines(out);
    std::string line;
    for (size_t i = 0; std::getline(lines, line); ++i) {
        std::istringstream ids(line);
        Vector v;
        v.input = i < inputs.size() ? inputs[i] : std::string();
        for (int32_t id; ids >> id;) v.ids.push_back(id);
        vectors.push_back(std::move(v));
    }
    EXPECT_EQ(vectors.size(), inputs.size()) << name;
    return vectors;
}

std::string show(const std::vector<int32_t>& ids) {
    std::string s;
    for (int32_t id : ids) s += std::to_string(id) + " ";
    return s;
}

class GgufVectors : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufVectors, EncodeMatchesEveryVectorAndRoundTrips) {
    const std::string name = GetParam();
    const Tokenizer tok = Tokenizer::from_gguf(testing::assets_dir() / name);
    const auto vectors = read_vectors(name);
    ASSERT_GT(vectors.size(), 30u);
    for (const Vector& v : vectors) {
        const auto ids = tok.encode(v.input);
        EXPECT_EQ(show(ids), show(v.ids)) << "input: [" << v.input << "]";
        EXPECT_EQ(tok.decode(ids), v.input);
    }
}

INSTANTIATE_TEST_SUITE_P(Vocab, GgufVectors,
                         ::testing::Values("ggml-vocab-gpt-2.gguf", "ggml-vocab-qwen2.gguf"),
                         [](const auto& info) {
                             return info.param.find("qwen2") != std::string::npos ? "qwen2" : "gpt2";
                         });

TEST(RankedBytes, ReproducesGpt2MergesFromIdOrder) {
    const Tokenizer gguf = Tokenizer::from_gguf(testing::assets_dir() / "ggml-vocab-gpt-2.gguf");
    std::vector<std::string> bytes;
    for (size_t id = 0; id < gguf.vocab_size(); ++id) bytes.push_back(gguf.token_bytes(static_cast<int32_t>(id)));
    const Tokenizer ranked = Tokenizer::from_ranked_bytes(bytes);
    ASSERT_EQ(ranked.vocab_size(), gguf.vocab_size());
    for (const Vector& v : read_vectors("ggml-vocab-gpt-2.gguf")) {
        EXPECT_EQ(show(ranked.encode(v.input)), show(v.ids)) << "input: [" << v.input << "]";
    }
    // Longer text exercises many more merges than the vectors.
    std::string text;
    for (const Vector& v : read_vectors("ggml-vocab-gpt-2.gguf")) text += v.input + " ";
    text += "The quick brown fox jumps over the lazy dog; internationalization, antidisestablishment.";
    EXPECT_EQ(show(ranked.encode(text)), show(gguf.encode(text)));
}

TEST(RankedBytes, SpecialTokensByLayout) {
    const Tokenizer gguf = Tokenizer::from_gguf(testing::assets_dir() / "ggml-vocab-gpt-2.gguf");
    std::vector<std::string> bytes;
    for (int32_t id = 0; id < 50256; ++id) bytes.push_back(gguf.token_bytes(id));
    Tokenizer tok = Tokenizer::from_ranked_bytes(bytes);
    tok.add_special_token("<|endoftext|>", 50256);
    tok.add_special_token("<|startoftranscript|>", 50257);
    tok.add_special_token("<|en|>", 50259);  // leaves a hole at 50258
    EXPECT_EQ(tok.vocab_size(), 50260u);
    EXPECT_EQ(tok.token_to_id("<|en|>"), 50259);
    EXPECT_TRUE(tok.is_special(50257));
    EXPECT_FALSE(tok.is_special(50258));
    EXPECT_THROW(tok.decode(std::vector<int32_t>{50258}), Error);
    EXPECT_EQ(tok.encode("<|startoftranscript|><|en|>", true), (std::vector<int32_t>{50257, 50259}));
    const auto plain = tok.encode("<|en|>", false);
    EXPECT_GT(plain.size(), 1u);
    EXPECT_EQ(tok.decode(plain), "<|en|>");
    EXPECT_EQ(tok.decode(std::vector<int32_t>{50257, 464}, true), gguf.token_bytes(464));
    // An occupied id cannot be redefined.
    EXPECT_THROW(tok.add_special_token("<|nope|>", 464), Error);
}

}  // namespace
}  // namespace parlance
