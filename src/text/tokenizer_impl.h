// Tokenizer::Impl: the vocabulary, merges and pre-tokenizer stages every loader fills in
// (tokenizer_json.cpp, tokenizer_gguf.cpp, tokenizer.cpp's ranked bytes), and the byte-level BPE
// encoder over them (tokenizer_impl.cpp). Private to src/text.
#pragma once

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "text/tokenizer.h"

namespace parlance {
namespace tokenizer_detail {

// Byte-level BPE writes every byte as a printable code point (so ' ' is 'Ġ' U+0120).
std::string byte_level_encode(std::string_view bytes);
// Byte-level text back to raw bytes; characters outside the table are kept as their UTF-8.
std::string byte_level_decode(std::string_view text);

// Error(InvalidModel) naming the file and field; Error(Unsupported) for what we do not implement.
[[noreturn]] void bad_field(const std::string& origin, std::string_view field,
                            std::string_view why);
[[noreturn]] void unsupported(const std::string& origin, std::string_view field,
                              std::string_view what);

// ---- hashing helpers ----------------------------------------------------------------------------
struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept {
        return std::hash<std::string_view>{}(s);
    }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

inline uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

// ---- regexes ------------------------------------------------------------------------------------
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct CodeDeleter {
    void operator()(pcre2_code* c) const noexcept { pcre2_code_free(c); }
};
using RegexPtr = std::unique_ptr<pcre2_code, CodeDeleter>;

// Compiles a pre-tokenizer pattern (UTF-8, Unicode classes; `literal`: a plain string).
RegexPtr compile_regex(std::string_view pattern, bool literal, const std::string& where);

struct MatchDataDeleter {
    void operator()(pcre2_match_data* m) const noexcept { pcre2_match_data_free(m); }
};

// One pre-tokenizer step, applied to every piece produced by the previous steps.
struct Stage {
    enum class Kind { Split, PrefixSpace };
    enum class Behavior { Isolated, Removed };
    Kind kind = Kind::Split;
    RegexPtr regex;
    Behavior behavior = Behavior::Isolated;
    bool invert = false;  // pieces are the gaps between matches and vice versa
};

enum class TokenKind : uint8_t { Hole, Normal, Added, Special };

struct TokenInfo {
    std::string bytes;  // raw bytes (added tokens: their content)
    std::string text;   // as written in the vocabulary (byte-level form) or the added content
    TokenKind kind = TokenKind::Hole;
};

struct Merge {
    int32_t rank;
    int32_t id;
};

// Byte trie over added tokens for leftmost-longest matching.
class AddedTrie {
  public:
    AddedTrie() { nodes_.emplace_back(); }
    bool empty() const { return nodes_.size() == 1; }

    void insert(std::string_view content, int32_t id) {
        int32_t node = 0;
        for (unsigned char c : content) {
            int32_t next = child(node, c);
            if (next < 0) {
                next = static_cast<int32_t>(nodes_.size());
                nodes_.emplace_back();
                nodes_[node].children.emplace_back(c, next);
            }
            node = next;
        }
        nodes_[node].id = id;
    }

    // Longest added token starting at text[pos] whose id is accepted; {length, id}, length 0 if
    // none.
    template <typename Accept>
    std::pair<size_t, int32_t> longest(std::string_view text, size_t pos, Accept&& accept) const {
        std::pair<size_t, int32_t> best{0, -1};
        int32_t node = 0;
        for (size_t i = pos; i < text.size(); ++i) {
            node = child(node, static_cast<unsigned char>(text[i]));
            if (node < 0) break;
            if (nodes_[node].id >= 0 && accept(nodes_[node].id))
                best = {i - pos + 1, nodes_[node].id};
        }
        return best;
    }

  private:
    struct Node {
        std::vector<std::pair<unsigned char, int32_t>> children;
        int32_t id = -1;
    };
    int32_t child(int32_t node, unsigned char c) const {
        for (const auto& [k, v] : nodes_[node].children)
            if (k == c) return v;
        return -1;
    }
    std::vector<Node> nodes_;
};

inline constexpr size_t kCacheCapacity = 1 << 15;  // words; the cache is cleared when it fills up
inline constexpr size_t kCacheMaxWord = 256;       // longer words are not cached

}  // namespace tokenizer_detail

struct Tokenizer::Impl {
    using TokenInfo = tokenizer_detail::TokenInfo;
    using Stage = tokenizer_detail::Stage;

    std::string origin;  // file name for error messages
    std::vector<TokenInfo> tokens;
    tokenizer_detail::StringMap<int32_t> bytes_to_id;  // model vocabulary by raw bytes
    tokenizer_detail::StringMap<int32_t> text_to_id;   // vocabulary text and added-token content
    std::array<int32_t, 256> byte_id{};
    std::unordered_map<uint64_t, tokenizer_detail::Merge> merges;
    bool ignore_merges = false;
    bool nfc = false;
    std::vector<Stage> stages;
    tokenizer_detail::AddedTrie added;

    mutable std::mutex cache_mu;
    mutable tokenizer_detail::StringMap<std::vector<int32_t>> cache;

    Impl() { byte_id.fill(-1); }

    void set_token(int32_t id, TokenInfo info);
    // Builds bytes_to_id, byte_id and text_to_id from tokens; checks for duplicates.
    void index(std::string_view field);
    void rebuild_added();
    void add_merge(int32_t a, int32_t b, int32_t rank, int32_t id);
    // BPE of one pre-tokenized piece, through the word cache.
    void bpe(std::string_view word, std::vector<int32_t>& out) const;
    // Applies merges lowest rank first (leftmost among equal ranks) on the bytes of one word.
    std::vector<int32_t> merge_word(std::string_view word) const;
    // Splits `piece` by one regex stage, appending the resulting pieces.
    void split(const Stage& stage, pcre2_match_data* md, std::string_view piece,
               std::vector<std::string_view>& out) const;
    // Encodes well-formed UTF-8 text that holds no added token.
    void encode_text(std::string_view text, std::vector<int32_t>& out) const;
    // Encodes any bytes holding no added token: ill-formed UTF-8 becomes byte tokens.
    void encode_segment(std::string_view seg, std::vector<int32_t>& out) const;
    const TokenInfo& checked(int32_t id) const;
};

}  // namespace parlance
