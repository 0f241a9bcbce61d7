// Tokenizer loading errors: each names the file and field; small hand-made tokenizer.json files
// exercise the json features (merge forms, ByteLevel options, Split stages, ignore_merges).
#include <gguf.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "test_support.h"
#include "text/tokenizer.h"

namespace parlance {
namespace {

using Ids = std::vector<int32_t>;

// A tiny byte-level BPE over the letters a, b, c and space ("Ġ"): merges a+b, ab+c, Ġ+a.
std::string tiny_json(const std::string& merges, const std::string& pre = R"({"type":"ByteLevel","add_prefix_space":false,"use_regex":true})",
                      const std::string& extra_model = "", const std::string& normalizer = "null") {
    return R"({"version":"1.0","added_tokens":[{"id":8,"content":"<|x|>","special":true},{"id":9,"content":"<y>","special":false}],
      "normalizer":)" + normalizer + R"(,"pre_tokenizer":)" + pre + R"(,"decoder":{"type":"ByteLevel"},
      "model":{"type":"BPE")" + extra_model + R"(,"vocab":{"a":0,"b":1,"c":2,"Ġ":3,"ab":4,"abc":5,"Ġa":6,"ca":7},
      "merges":)" + merges + "}}";
}

void expect_error(ErrorKind kind, const std::function<void()>& f, const std::vector<std::string>& mentions) {
    try {
        f();
        ADD_FAILURE() << "no exception";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), kind) << e.what();
        for (const auto& m : mentions) EXPECT_NE(std::string(e.what()).find(m), std::string::npos) << e.what() << " lacks " << m;
    }
}

TEST(TokenizerJson, BothMergeFormsGiveTheSameResult) {
    const Tokenizer s = Tokenizer::from_json(tiny_json(R"(["a b","ab c","Ġ a"])"));
    const Tokenizer a = Tokenizer::from_json(tiny_json(R"([["a","b"],["ab","c"],["Ġ","a"]])"));
    // "abc" | " ab" | " cab" | " a": a+b first, then ab+c; Ġ+a only where a is still alone.
    EXPECT_EQ(s.encode("abc ab cab a"), (Ids{5, 3, 4, 3, 2, 4, 6}));
    EXPECT_EQ(a.encode("abc ab cab a"), s.encode("abc ab cab a"));
    EXPECT_EQ(s.decode(s.encode("abc ab cab a")), "abc ab cab a");
    EXPECT_EQ(s.vocab_size(), 10u);
    EXPECT_EQ(s.encode("a<|x|>b", true), (Ids{0, 8, 1}));
    EXPECT_EQ(s.encode("a<y>b"), (Ids{0, 9, 1}));
}

TEST(TokenizerJson, MergeRankOrderMatters) {
    // With "b c" ranked before "a b", "abc" must become a + bc, not ab + c.
    const std::string json = R"({"added_tokens":[],"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false},
      "model":{"type":"BPE","vocab":{"a":0,"b":1,"c":2,"ab":3,"bc":4},"merges":["b c","a b"]}})";
    EXPECT_EQ(Tokenizer::from_json(json).encode("abc"), (Ids{0, 4}));
}

TEST(TokenizerJson, AddPrefixSpaceAndIgnoreMerges) {
    const Tokenizer p = Tokenizer::from_json(
        tiny_json(R"(["a b","ab c","Ġ a"])", R"({"type":"ByteLevel","add_prefix_space":true,"use_regex":true})"));
    EXPECT_EQ(p.encode("a"), (Ids{6}));      // " a"
    EXPECT_EQ(p.encode(" a"), (Ids{6}));     // already starts with a space
    // ignore_merges: a word that is in the vocabulary is taken whole, even without a merge path.
    const Tokenizer no_path = Tokenizer::from_json(tiny_json(R"(["a b"])"));
    EXPECT_EQ(no_path.encode("ca"), (Ids{2, 0}));
    const Tokenizer ig = Tokenizer::from_json(tiny_json(R"(["a b"])", R"({"type":"ByteLevel","add_prefix_space":false})",
                                                        R"(,"ignore_merges":true)"));
    EXPECT_EQ(ig.encode("ca"), (Ids{7}));
}

TEST(TokenizerJson, SplitStagesAndSequenceNormalizer) {
    // Split on spaces with Removed (spaces dropped), then ByteLevel without regex.
    const std::string pre = R"({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"String":" "},"behavior":"Removed","invert":false},
                               {"type":"ByteLevel","add_prefix_space":false,"use_regex":false}]})";
    const Tokenizer t = Tokenizer::from_json(tiny_json(R"(["a b","ab c"])", pre, "", R"({"type":"Sequence","normalizers":[{"type":"NFC"}]})"));
    EXPECT_EQ(t.encode("ab  abc c"), (Ids{4, 5, 2}));
}

TEST(TokenizerErrors, TruncatedJson) {
    const std::string full = tiny_json(R"(["a b"])");
    expect_error(ErrorKind::InvalidModel, [&] { Tokenizer::from_json(full.substr(0, full.size() / 2), "cut.json"); },
                 {"cut.json", "malformed JSON"});
}

TEST(TokenizerErrors, TruncatedRealFile) {
    testing::TempDir dir;
    const std::string real = testing::read_file(testing::assets_dir() / "qwen3" / "tokenizer.json");
    testing::write_file(dir / "tokenizer.json", real.substr(0, real.size() - 100));
    expect_error(ErrorKind::InvalidModel, [&] { Tokenizer::from_json_file(dir / "tokenizer.json"); },
                 {(dir / "tokenizer.json").string()});
}

TEST(TokenizerErrors, UnknownTokenInMerges) {
    expect_error(ErrorKind::InvalidModel, [] { Tokenizer::from_json(tiny_json(R"(["a b","a zz"])"), "m.json"); },
                 {"m.json", "model.merges[1]", "zz"});
    // The merged result must exist too.
    expect_error(ErrorKind::InvalidModel, [] { Tokenizer::from_json(tiny_json(R"(["b a"])"), "m.json"); },
                 {"model.merges[0]", "ba"});
    expect_error(ErrorKind::InvalidModel, [] { Tokenizer::from_json(tiny_json(R"(["ab"])"), "m.json"); },
                 {"model.merges[0]"});
}

TEST(TokenizerErrors, UnknownModelTypeAndMissingFields) {
    expect_error(ErrorKind::InvalidModel,
                 [] { Tokenizer::from_json(R"({"model":{"type":"Unigram","vocab":[]}})", "u.json"); },
                 {"u.json", "model.type", "Unigram"});
    expect_error(ErrorKind::InvalidModel, [] { Tokenizer::from_json(R"({"model":{"type":"BPE","merges":[]}})", "v.json"); },
                 {"v.json", "model.vocab"});
    expect_error(ErrorKind::InvalidModel, [] { Tokenizer::from_json("[1,2]", "r.json"); }, {"r.json"});
    expect_error(ErrorKind::Unsupported,
                 [] { Tokenizer::from_json(tiny_json(R"([])", R"({"type":"Whitespace"})"), "w.json"); },
                 {"w.json", "pre_tokenizer", "Whitespace"});
    expect_error(ErrorKind::InvalidModel,
                 [] { Tokenizer::from_json(tiny_json(R"([])", R"({"type":"Split","pattern":{"Regex":"(a"},"behavior":"Isolated"})")); },
                 {"regex"});
    expect_error(ErrorKind::NotFound, [] { Tokenizer::from_json_file("/nonexistent/tokenizer.json"); },
                 {"/nonexistent/tokenizer.json"});
}

TEST(TokenizerErrors, BadIdsToDecode) {
    const Tokenizer t = Tokenizer::from_json(tiny_json(R"(["a b"])"));
    expect_error(ErrorKind::InvalidArgument, [&] { t.decode(Ids{0, 10}); }, {"10"});
    expect_error(ErrorKind::InvalidArgument, [&] { t.decode(Ids{-1}); }, {"-1"});
    expect_error(ErrorKind::InvalidArgument, [&] { t.token_bytes(12345); }, {"12345"});
    EXPECT_FALSE(t.token_to_id("nope").has_value());
}

TEST(TokenizerErrors, GgufProblems) {
    expect_error(ErrorKind::NotFound, [] { Tokenizer::from_gguf("/nonexistent/x.gguf"); }, {"/nonexistent/x.gguf"});
    testing::TempDir dir;
    testing::write_file(dir / "junk.gguf", "this is not a gguf file at all");
    expect_error(ErrorKind::InvalidModel, [&] { Tokenizer::from_gguf(dir / "junk.gguf"); }, {"junk.gguf"});
}

// Writes a small GGUF vocabulary: tokens a, b, ab, <|end|> (control); the given merges and pre.
void write_gguf(const std::filesystem::path& path, const char* model, const char* pre,
                std::vector<const char*> merges) {
    gguf_context* ctx = gguf_init_empty();
    gguf_set_val_str(ctx, "tokenizer.ggml.model", model);
    gguf_set_val_str(ctx, "tokenizer.ggml.pre", pre);
    std::vector<const char*> tokens = {"a", "b", "ab", "<|end|>"};
    gguf_set_arr_str(ctx, "tokenizer.ggml.tokens", tokens.data(), tokens.size());
    const int32_t types[] = {1, 1, 1, 3};
    gguf_set_arr_data(ctx, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, 4);
    gguf_set_arr_str(ctx, "tokenizer.ggml.merges", merges.data(), merges.size());
    ASSERT_TRUE(gguf_write_to_file(ctx, path.c_str(), true));
    gguf_free(ctx);
}

TEST(TokenizerGguf, SmallVocabularyAndErrors) {
    testing::TempDir dir;
    write_gguf(dir / "ok.gguf", "gpt2", "gpt-2", {"a b"});
    const Tokenizer ok = Tokenizer::from_gguf(dir / "ok.gguf");
    EXPECT_EQ(ok.encode("abba<|end|>", true), (Ids{2, 1, 0, 3}));
    EXPECT_TRUE(ok.is_special(3));

    write_gguf(dir / "pre.gguf", "gpt2", "llama-bpe", {"a b"});
    expect_error(ErrorKind::Unsupported, [&] { Tokenizer::from_gguf(dir / "pre.gguf"); },
                 {"pre.gguf", "tokenizer.ggml.pre", "llama-bpe"});
    write_gguf(dir / "model.gguf", "llama", "gpt-2", {"a b"});
    expect_error(ErrorKind::Unsupported, [&] { Tokenizer::from_gguf(dir / "model.gguf"); },
                 {"model.gguf", "tokenizer.ggml.model", "llama"});
    write_gguf(dir / "merge.gguf", "gpt2", "gpt-2", {"a b", "b q"});
    expect_error(ErrorKind::InvalidModel, [&] { Tokenizer::from_gguf(dir / "merge.gguf"); },
                 {"merge.gguf", "tokenizer.ggml.merges[1]", "'q'"});
}

TEST(TokenizerErrors, RankedBytesDuplicates) {
    expect_error(ErrorKind::InvalidModel, [] { Tokenizer::from_ranked_bytes({"a", "b", "a"}); }, {"same bytes"});
    expect_error(ErrorKind::InvalidModel, [] { Tokenizer::from_ranked_bytes({"a", ""}); }, {"empty"});
}

}  // namespace
}  // namespace parlance
