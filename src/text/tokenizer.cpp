// Byte-level BPE: loading (tokenizer.json, GGUF, ranked bytes), pre-tokenization, merges, decoding.
#include "text/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <gguf.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <mutex>
#include <queue>
#include <sstream>
#include <unordered_map>

#include "core/error.h"
#include "text/utf8.h"

namespace parlance {

namespace {

using json = nlohmann::json;

// ---- GPT-2 byte <-> unicode table -------------------------------------------------------------
// Byte-level BPE writes every byte as a printable code point: bytes that are printable Latin-1
// stay themselves, the 68 others map in order to U+0100.. (so ' ' is 'Ġ' U+0120).
struct ByteLevelTable {
    std::array<char32_t, 256> to_cp{};
    std::array<int16_t, 324> from_cp{};  // code point -> byte, -1 if not a byte-level character

    constexpr ByteLevelTable() {
        for (auto& v : from_cp) v = -1;
        int extra = 0;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
            to_cp[b] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + extra++);
            from_cp[to_cp[b]] = static_cast<int16_t>(b);
        }
    }
};
constexpr ByteLevelTable kByteLevel{};

std::string byte_level_encode(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size() * 2);
    for (unsigned char b : bytes) utf8::append(out, kByteLevel.to_cp[b]);
    return out;
}

// Byte-level text back to raw bytes. Characters outside the table (which a well-formed byte-level
// vocabulary never has) are kept as their own UTF-8 bytes; invalid UTF-8 is kept as is.
std::string byte_level_decode(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    size_t pos = 0;
    while (pos < text.size()) {
        const utf8::Scan s = utf8::scan(text, pos);
        if (s.status == utf8::Scan::Status::Valid && s.code_point < kByteLevel.from_cp.size() &&
            kByteLevel.from_cp[s.code_point] >= 0) {
            out.push_back(static_cast<char>(kByteLevel.from_cp[s.code_point]));
        } else {
            out.append(text.substr(pos, s.length));
        }
        pos += s.length;
    }
    return out;
}

// ---- hashing helpers ----------------------------------------------------------------------------
struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

// ---- regexes ------------------------------------------------------------------------------------
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct CodeDeleter {
    void operator()(pcre2_code* c) const noexcept { pcre2_code_free(c); }
};
using RegexPtr = std::unique_ptr<pcre2_code, CodeDeleter>;

RegexPtr compile_regex(std::string_view pattern, bool literal, const std::string& where) {
    int err = 0;
    PCRE2_SIZE offset = 0;
    // PCRE2_LITERAL refuses PCRE2_UCP (which only matters for character classes anyway).
    const uint32_t options = literal ? (PCRE2_UTF | PCRE2_LITERAL) : (PCRE2_UTF | PCRE2_UCP);
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                     options, &err, &offset, nullptr);
    if (!code) {
        std::array<PCRE2_UCHAR, 256> msg{};
        pcre2_get_error_message(err, msg.data(), msg.size());
        throw Error(ErrorKind::InvalidModel, where + ": regex does not compile at offset " +
                                                 std::to_string(offset) + ": " +
                                                 reinterpret_cast<const char*>(msg.data()));
    }
    // JIT is an optimization: when unavailable pcre2_match falls back to the interpreter.
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    return RegexPtr(code);
}

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

    // Longest added token starting at text[pos] whose id is accepted; {length, id}, length 0 if none.
    template <typename Accept>
    std::pair<size_t, int32_t> longest(std::string_view text, size_t pos, Accept&& accept) const {
        std::pair<size_t, int32_t> best{0, -1};
        int32_t node = 0;
        for (size_t i = pos; i < text.size(); ++i) {
            node = child(node, static_cast<unsigned char>(text[i]));
            if (node < 0) break;
            if (nodes_[node].id >= 0 && accept(nodes_[node].id)) best = {i - pos + 1, nodes_[node].id};
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

constexpr size_t kCacheCapacity = 1 << 15;  // words; the cache is cleared when it fills up
constexpr size_t kCacheMaxWord = 256;       // longer words are not cached

}  // namespace

struct Tokenizer::Impl {
    std::string origin;  // file name for error messages
    std::vector<TokenInfo> tokens;
    StringMap<int32_t> bytes_to_id;  // model vocabulary by raw bytes
    StringMap<int32_t> text_to_id;   // vocabulary text and added-token content
    std::array<int32_t, 256> byte_id{};
    std::unordered_map<uint64_t, Merge> merges;
    bool ignore_merges = false;
    bool nfc = false;
    std::vector<Stage> stages;
    AddedTrie added;

    mutable std::mutex cache_mu;
    mutable StringMap<std::vector<int32_t>> cache;

    Impl() { byte_id.fill(-1); }

    void set_token(int32_t id, TokenInfo info) {
        if (id < 0) throw Error(ErrorKind::InvalidModel, origin + ": negative token id");
        if (static_cast<size_t>(id) >= tokens.size()) tokens.resize(static_cast<size_t>(id) + 1);
        tokens[id] = std::move(info);
    }

    // Builds bytes_to_id, byte_id and text_to_id from tokens; checks for duplicates.
    void index(std::string_view field) {
        bytes_to_id.reserve(tokens.size());
        text_to_id.reserve(tokens.size());
        for (size_t i = 0; i < tokens.size(); ++i) {
            const TokenInfo& t = tokens[i];
            const auto id = static_cast<int32_t>(i);
            if (t.kind == TokenKind::Hole) continue;
            if (t.kind == TokenKind::Normal) {
                if (t.bytes.empty())
                    throw Error(ErrorKind::InvalidModel,
                                origin + ": " + std::string(field) + ": token " + std::to_string(id) +
                                    " is empty");
                // Keep the lowest id when two vocabulary entries have the same bytes.
                bytes_to_id.emplace(t.bytes, id);
            }
            text_to_id.emplace(t.text, id);
        }
        for (int b = 0; b < 256; ++b) {
            auto it = bytes_to_id.find(std::string_view(std::string(1, static_cast<char>(b))));
            byte_id[b] = it == bytes_to_id.end() ? -1 : it->second;
        }
    }

    void rebuild_added() {
        added = AddedTrie();
        for (size_t i = 0; i < tokens.size(); ++i) {
            const TokenInfo& t = tokens[i];
            if ((t.kind == TokenKind::Added || t.kind == TokenKind::Special) && !t.text.empty())
                added.insert(t.text, static_cast<int32_t>(i));
            if (t.kind == TokenKind::Added || t.kind == TokenKind::Special)
                text_to_id[t.text] = static_cast<int32_t>(i);
        }
    }

    void add_merge(int32_t a, int32_t b, int32_t rank, int32_t id) {
        merges.emplace(pair_key(a, b), Merge{rank, id});  // first (lowest rank) wins
    }

    // ---- encoding -------------------------------------------------------------------------------

    void bpe(std::string_view word, std::vector<int32_t>& out) const {
        if (word.size() == 1) {
            const int32_t id = byte_id[static_cast<unsigned char>(word[0])];
            if (id >= 0) out.push_back(id);
            return;
        }
        if (ignore_merges) {
            auto it = bytes_to_id.find(word);
            if (it != bytes_to_id.end()) {
                out.push_back(it->second);
                return;
            }
        }
        const bool cacheable = word.size() <= kCacheMaxWord;
        if (cacheable) {
            std::lock_guard lock(cache_mu);
            auto it = cache.find(word);
            if (it != cache.end()) {
                out.insert(out.end(), it->second.begin(), it->second.end());
                return;
            }
        }
        std::vector<int32_t> ids = merge_word(word);
        out.insert(out.end(), ids.begin(), ids.end());
        if (cacheable) {
            std::lock_guard lock(cache_mu);
            if (cache.size() >= kCacheCapacity) cache.clear();
            cache.emplace(std::string(word), std::move(ids));
        }
    }

    // Applies merges lowest rank first (leftmost among equal ranks) on the bytes of one word.
    std::vector<int32_t> merge_word(std::string_view word) const {
        struct Symbol {
            int32_t id;
            int32_t prev;
            int32_t next;
        };
        std::vector<Symbol> sym;
        sym.reserve(word.size());
        for (unsigned char c : word) {
            const int32_t id = byte_id[c];
            if (id < 0) continue;  // a byte the vocabulary lacks is dropped (HF without unk_token)
            const auto i = static_cast<int32_t>(sym.size());
            sym.push_back({id, i - 1, i + 1});
        }
        if (sym.empty()) return {};
        sym.back().next = -1;

        struct Candidate {
            int32_t rank;
            int32_t left;
            int32_t right;
            int32_t result;
            bool operator>(const Candidate& o) const {
                return rank != o.rank ? rank > o.rank : left > o.left;
            }
        };
        std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
        auto push = [&](int32_t left, int32_t right) {
            if (left < 0 || right < 0) return;
            auto it = merges.find(pair_key(sym[left].id, sym[right].id));
            if (it != merges.end()) queue.push({it->second.rank, left, right, it->second.id});
        };
        for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) push(i, i + 1);

        while (!queue.empty()) {
            const Candidate c = queue.top();
            queue.pop();
            Symbol& l = sym[c.left];
            // Stale if either side was merged away or changed since the candidate was queued.
            if (l.id < 0 || l.next != c.right || sym[c.right].id < 0) continue;
            auto it = merges.find(pair_key(l.id, sym[c.right].id));
            if (it == merges.end() || it->second.rank != c.rank || it->second.id != c.result) continue;
            l.id = c.result;
            Symbol& r = sym[c.right];
            l.next = r.next;
            if (r.next >= 0) sym[r.next].prev = c.left;
            r.id = -1;
            push(l.prev, c.left);
            push(c.left, l.next);
        }
        std::vector<int32_t> ids;
        for (int32_t i = 0; i >= 0; i = sym[i].next) ids.push_back(sym[i].id);
        return ids;
    }

    // Splits `piece` by one regex stage, appending the resulting pieces.
    void split(const Stage& stage, pcre2_match_data* md, std::string_view piece,
               std::vector<std::string_view>& out) const {
        const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
        size_t pos = 0;   // where the search continues
        size_t last = 0;  // end of the last match
        auto emit = [&](size_t b, size_t e, bool is_match) {
            if (b >= e) return;
            if (stage.invert) is_match = !is_match;
            if (is_match && stage.behavior == Stage::Behavior::Removed) return;  // drop delimiters
            out.push_back(piece.substr(b, e - b));
        };
        while (pos <= piece.size()) {
            const int rc = pcre2_match(stage.regex.get(), subject, piece.size(), pos,
                                       PCRE2_NO_UTF_CHECK, md, nullptr);
            if (rc == PCRE2_ERROR_NOMATCH) break;
            if (rc < 0) {
                std::array<PCRE2_UCHAR, 256> msg{};
                pcre2_get_error_message(rc, msg.data(), msg.size());
                throw Error(ErrorKind::Internal, origin + ": pre-tokenizer regex failed: " +
                                                     reinterpret_cast<const char*>(msg.data()));
            }
            const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
            const size_t b = ov[0], e = ov[1];
            if (b == e) {  // empty match: ignore it and move on by one character
                if (pos >= piece.size()) break;
                pos += std::max<size_t>(1, utf8::scan(piece, pos).length);
                continue;
            }
            emit(last, b, false);
            emit(b, e, true);
            last = pos = e;
        }
        emit(last, piece.size(), false);
    }

    // Encodes well-formed UTF-8 text that holds no added token.
    void encode_text(std::string_view text, std::vector<int32_t>& out) const {
        if (text.empty()) return;
        std::string normalized;
        if (nfc && std::any_of(text.begin(), text.end(), [](char c) { return c & 0x80; })) {
            utf8proc_uint8_t* dst = nullptr;
            const utf8proc_ssize_t n = utf8proc_map(
                reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                static_cast<utf8proc_ssize_t>(text.size()), &dst,
                static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
            if (n < 0) {
                throw Error(ErrorKind::Internal,
                            origin + ": NFC failed: " + utf8proc_errmsg(n));
            }
            normalized.assign(reinterpret_cast<const char*>(dst), static_cast<size_t>(n));
            std::free(dst);
            text = normalized;
        }
        std::deque<std::string> arena;  // pieces that are not views of `text` (prefix space)
        std::vector<std::string_view> pieces{text}, next;
        for (const Stage& stage : stages) {
            next.clear();
            if (stage.kind == Stage::Kind::PrefixSpace) {
                for (std::string_view p : pieces) {
                    if (!p.empty() && p[0] == ' ') {
                        next.push_back(p);
                    } else {
                        next.push_back(arena.emplace_back(" " + std::string(p)));
                    }
                }
            } else {
                std::unique_ptr<pcre2_match_data, MatchDataDeleter> md(
                    pcre2_match_data_create_from_pattern(stage.regex.get(), nullptr));
                if (!md) throw Error(ErrorKind::Internal, "out of memory for regex match data");
                for (std::string_view p : pieces) split(stage, md.get(), p, next);
            }
            pieces.swap(next);
        }
        for (std::string_view p : pieces) bpe(p, out);
    }

    // Encodes any bytes holding no added token: ill-formed UTF-8 becomes byte tokens.
    void encode_segment(std::string_view seg, std::vector<int32_t>& out) const {
        size_t pos = 0;
        while (pos < seg.size()) {
            const size_t valid = utf8::valid_prefix(seg.substr(pos));
            encode_text(seg.substr(pos, valid), out);
            pos += valid;
            if (pos >= seg.size()) break;
            const size_t bad = utf8::scan(seg, pos).length;
            for (size_t i = 0; i < bad; ++i) {
                const int32_t id = byte_id[static_cast<unsigned char>(seg[pos + i])];
                if (id >= 0) out.push_back(id);
            }
            pos += bad;
        }
    }

    const TokenInfo& checked(int32_t id) const {
        if (id < 0 || static_cast<size_t>(id) >= tokens.size() ||
            tokens[id].kind == TokenKind::Hole) {
            throw Error(ErrorKind::InvalidArgument,
                        "token id " + std::to_string(id) + " is not in the vocabulary (size " +
                            std::to_string(tokens.size()) + ")");
        }
        return tokens[id];
    }
};

namespace {

// ---- tokenizer.json -----------------------------------------------------------------------------

[[noreturn]] void bad_field(const std::string& origin, std::string_view field, std::string_view why) {
    throw Error(ErrorKind::InvalidModel, origin + ": field '" + std::string(field) + "' " + std::string(why));
}

[[noreturn]] void unsupported(const std::string& origin, std::string_view field, std::string_view what) {
    throw Error(ErrorKind::Unsupported, origin + ": field '" + std::string(field) + "': " + std::string(what) +
                                            " is not supported");
}

const json& member(const json& obj, const char* key, const std::string& origin, std::string_view path) {
    if (!obj.is_object()) bad_field(origin, path, "is not an object");
    auto it = obj.find(key);
    if (it == obj.end()) bad_field(origin, std::string(path) + "." + key, "is missing");
    return *it;
}

std::string type_of(const json& obj, const std::string& origin, std::string_view path) {
    const json& t = member(obj, "type", origin, path);
    if (!t.is_string()) bad_field(origin, std::string(path) + ".type", "is not a string");
    return t.get<std::string>();
}

bool flag(const json& obj, const char* key, bool fallback, const std::string& origin, std::string_view path) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) bad_field(origin, std::string(path) + "." + key, "is not a boolean");
    return it->get<bool>();
}

void parse_normalizer(const json& n, Tokenizer::Impl& impl, const std::string& path) {
    if (n.is_null()) return;
    const std::string type = type_of(n, impl.origin, path);
    if (type == "NFC") {
        impl.nfc = true;
    } else if (type == "Sequence") {
        const json& list = member(n, "normalizers", impl.origin, path);
        if (!list.is_array()) bad_field(impl.origin, path + ".normalizers", "is not an array");
        for (size_t i = 0; i < list.size(); ++i)
            parse_normalizer(list[i], impl, path + ".normalizers[" + std::to_string(i) + "]");
    } else {
        unsupported(impl.origin, path + ".type", "normalizer '" + type + "'");
    }
}

// Returns whether a ByteLevel step was seen.
bool parse_pre_tokenizer(const json& p, Tokenizer::Impl& impl, const std::string& path) {
    if (p.is_null()) return false;
    const std::string type = type_of(p, impl.origin, path);
    if (type == "Sequence") {
        const json& list = member(p, "pretokenizers", impl.origin, path);
        if (!list.is_array()) bad_field(impl.origin, path + ".pretokenizers", "is not an array");
        bool byte_level = false;
        for (size_t i = 0; i < list.size(); ++i)
            byte_level |= parse_pre_tokenizer(list[i], impl, path + ".pretokenizers[" + std::to_string(i) + "]");
        return byte_level;
    }
    if (type == "ByteLevel") {
        // HF defaults: add_prefix_space = true, use_regex = true.
        if (flag(p, "add_prefix_space", true, impl.origin, path)) {
            Stage s;
            s.kind = Stage::Kind::PrefixSpace;
            impl.stages.push_back(std::move(s));
        }
        if (flag(p, "use_regex", true, impl.origin, path)) {
            Stage s;
            s.regex = compile_regex(kGpt2Pattern, false, impl.origin);
            impl.stages.push_back(std::move(s));
        }
        return true;
    }
    if (type == "Split") {
        const json& pattern = member(p, "pattern", impl.origin, path);
        Stage s;
        if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
            s.regex = compile_regex(pattern["Regex"].get<std::string>(), false, impl.origin + ": " + path);
        } else if (pattern.contains("String") && pattern["String"].is_string()) {
            s.regex = compile_regex(pattern["String"].get<std::string>(), true, impl.origin + ": " + path);
        } else {
            bad_field(impl.origin, path + ".pattern", "has neither a Regex nor a String");
        }
        const json& behavior = member(p, "behavior", impl.origin, path);
        const std::string b = behavior.is_string() ? behavior.get<std::string>() : "";
        if (b == "Isolated") {
            s.behavior = Stage::Behavior::Isolated;
        } else if (b == "Removed") {
            s.behavior = Stage::Behavior::Removed;
        } else {
            unsupported(impl.origin, path + ".behavior", "split behavior '" + b + "'");
        }
        s.invert = flag(p, "invert", false, impl.origin, path);
        if (s.invert && s.behavior == Stage::Behavior::Removed)
            unsupported(impl.origin, path + ".invert", "inverted Removed split");
        impl.stages.push_back(std::move(s));
        return false;
    }
    unsupported(impl.origin, path + ".type", "pre-tokenizer '" + type + "'");
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_json_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        std::error_code ec;
        throw Error(std::filesystem::exists(path, ec) ? ErrorKind::Io : ErrorKind::NotFound,
                    path.string() + ": cannot open tokenizer file");
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) throw Error(ErrorKind::Io, path.string() + ": read failed");
    return from_json(ss.str(), path.string());
}

Tokenizer Tokenizer::from_json(std::string_view text, std::string_view origin_view) {
    auto impl = std::make_unique<Impl>();
    impl->origin = std::string(origin_view);
    const std::string& origin = impl->origin;
    json j;
    try {
        j = json::parse(text);
    } catch (const json::parse_error& e) {
        throw Error(ErrorKind::InvalidModel, origin + ": malformed JSON: " + e.what());
    }
    if (!j.is_object()) bad_field(origin, "(root)", "is not an object");

    const json& model = member(j, "model", origin, "(root)");
    const std::string type = model.contains("type") ? type_of(model, origin, "model") : "BPE";
    if (type != "BPE")
        throw Error(ErrorKind::InvalidModel,
                    origin + ": field 'model.type' is '" + type + "'; only 'BPE' is supported");
    if (flag(model, "byte_fallback", false, origin, "model"))
        unsupported(origin, "model.byte_fallback", "byte fallback (SentencePiece-style BPE)");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
        auto it = model.find(key);
        if (it != model.end() && it->is_string() && !it->get<std::string>().empty())
            unsupported(origin, std::string("model.") + key, "a non-empty subword affix");
    }
    impl->ignore_merges = flag(model, "ignore_merges", false, origin, "model");

    const json& vocab = member(model, "vocab", origin, "model");
    if (!vocab.is_object()) bad_field(origin, "model.vocab", "is not an object");
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
        if (!it.value().is_number_integer())
            bad_field(origin, "model.vocab[\"" + it.key() + "\"]", "is not an integer id");
        const auto id = it.value().get<int64_t>();
        if (id < 0 || id > INT32_MAX)
            bad_field(origin, "model.vocab[\"" + it.key() + "\"]", "is out of range");
        impl->set_token(static_cast<int32_t>(id), {byte_level_decode(it.key()), it.key(), TokenKind::Normal});
    }
    impl->index("model.vocab");

    const json& merges = member(model, "merges", origin, "model");
    if (!merges.is_array()) bad_field(origin, "model.merges", "is not an array");
    impl->merges.reserve(merges.size());
    auto vocab_id = [&](const std::string& tok, size_t i) -> int32_t {
        auto it = vocab.find(tok);
        if (it == vocab.end())
            bad_field(origin, "model.merges[" + std::to_string(i) + "]",
                      "names token '" + tok + "' that is not in model.vocab");
        return it->get<int32_t>();
    };
    for (size_t i = 0; i < merges.size(); ++i) {
        const json& m = merges[i];
        std::string a, b;
        if (m.is_string()) {
            const std::string& s = m.get_ref<const std::string&>();
            const size_t sp = s.find(' ');
            if (sp == std::string::npos || sp == 0 || sp + 1 >= s.size())
                bad_field(origin, "model.merges[" + std::to_string(i) + "]", "is not of the form 'a b'");
            a = s.substr(0, sp);
            b = s.substr(sp + 1);
        } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
            a = m[0].get<std::string>();
            b = m[1].get<std::string>();
        } else {
            bad_field(origin, "model.merges[" + std::to_string(i) + "]", "is neither 'a b' nor [a, b]");
        }
        const int32_t ia = vocab_id(a, i), ib = vocab_id(b, i);
        const int32_t ir = vocab_id(a + b, i);
        impl->add_merge(ia, ib, static_cast<int32_t>(i), ir);
    }

    if (auto it = j.find("added_tokens"); it != j.end() && !it->is_null()) {
        if (!it->is_array()) bad_field(origin, "added_tokens", "is not an array");
        for (size_t i = 0; i < it->size(); ++i) {
            const json& t = (*it)[i];
            const std::string path = "added_tokens[" + std::to_string(i) + "]";
            const json& id = member(t, "id", origin, path);
            const json& content = member(t, "content", origin, path);
            if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
                bad_field(origin, path + ".id", "is not a valid id");
            if (!content.is_string()) bad_field(origin, path + ".content", "is not a string");
            const bool special = flag(t, "special", false, origin, path);
            const std::string c = content.get<std::string>();
            impl->set_token(id.get<int32_t>(), {c, c, special ? TokenKind::Special : TokenKind::Added});
        }
    }
    impl->rebuild_added();

    if (auto it = j.find("normalizer"); it != j.end()) parse_normalizer(*it, *impl, "normalizer");
    const json pre = j.contains("pre_tokenizer") ? j["pre_tokenizer"] : json();
    if (!parse_pre_tokenizer(pre, *impl, "pre_tokenizer"))
        unsupported(origin, "pre_tokenizer", "a BPE tokenizer without a ByteLevel pre-tokenizer");
    return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_gguf(const std::filesystem::path& path) {
    const std::string origin = path.string();
    {
        std::error_code ec;
        if (!std::filesystem::exists(path, ec))
            throw Error(ErrorKind::NotFound, origin + ": no such GGUF file");
    }
    gguf_init_params params{};
    params.no_alloc = true;
    params.ctx = nullptr;
    std::unique_ptr<gguf_context, decltype(&gguf_free)> ctx(gguf_init_from_file(origin.c_str(), params),
                                                            &gguf_free);
    if (!ctx) throw Error(ErrorKind::InvalidModel, origin + ": not a readable GGUF file");
    const gguf_context* g = ctx.get();

    auto key = [&](const char* name, bool required) -> int64_t {
        const int64_t k = gguf_find_key(g, name);
        if (k < 0 && required) bad_field(origin, name, "is missing");
        return k;
    };
    auto str_key = [&](const char* name) -> std::string {
        const int64_t k = key(name, true);
        if (gguf_get_kv_type(g, k) != GGUF_TYPE_STRING) bad_field(origin, name, "is not a string");
        return gguf_get_val_str(g, k);
    };
    auto str_array = [&](const char* name, bool required) -> int64_t {
        const int64_t k = key(name, required);
        if (k >= 0 && (gguf_get_kv_type(g, k) != GGUF_TYPE_ARRAY || gguf_get_arr_type(g, k) != GGUF_TYPE_STRING))
            bad_field(origin, name, "is not an array of strings");
        return k;
    };

    const std::string model = str_key("tokenizer.ggml.model");
    if (model != "gpt2")
        throw Error(ErrorKind::Unsupported,
                    origin + ": tokenizer.ggml.model '" + model + "' is not supported (only 'gpt2')");
    const std::string pre = gguf_find_key(g, "tokenizer.ggml.pre") >= 0 ? str_key("tokenizer.ggml.pre") : "default";

    auto impl = std::make_unique<Impl>();
    impl->origin = origin;
    Stage split;
    if (pre == "gpt-2") {
        split.regex = compile_regex(kGpt2Pattern, false, origin);
    } else if (pre == "qwen2") {
        split.regex = compile_regex(kQwen2Pattern, false, origin);
        impl->nfc = true;  // Qwen2's tokenizer.json normalizes to NFC; llama.cpp skips it
    } else {
        throw Error(ErrorKind::Unsupported,
                    origin + ": tokenizer.ggml.pre '" + pre + "' is not supported (known: gpt-2, qwen2)");
    }
    impl->stages.push_back(std::move(split));

    const int64_t tk = str_array("tokenizer.ggml.tokens", true);
    const size_t n = gguf_get_arr_n(g, tk);
    const int64_t tt = key("tokenizer.ggml.token_type", false);
    const int32_t* types = nullptr;
    if (tt >= 0) {
        if (gguf_get_kv_type(g, tt) != GGUF_TYPE_ARRAY || gguf_get_arr_type(g, tt) != GGUF_TYPE_INT32 ||
            gguf_get_arr_n(g, tt) != n)
            bad_field(origin, "tokenizer.ggml.token_type", "is not an int32 array as long as the tokens");
        types = static_cast<const int32_t*>(gguf_get_arr_data(g, tt));
    }
    impl->tokens.resize(n);
    for (size_t i = 0; i < n; ++i) {
        std::string text = gguf_get_arr_str(g, tk, i);
        const int32_t type = types ? types[i] : 1;
        TokenInfo& t = impl->tokens[i];
        if (type == 3 || type == 4) {  // control / user-defined: literal text, matched as a whole
            t = {text, text, type == 3 ? TokenKind::Special : TokenKind::Added};
        } else {
            t = {byte_level_decode(text), text, TokenKind::Normal};
        }
    }
    impl->index("tokenizer.ggml.tokens");
    impl->rebuild_added();

    const int64_t mk = str_array("tokenizer.ggml.merges", true);
    const size_t nm = gguf_get_arr_n(g, mk);
    impl->merges.reserve(nm);
    for (size_t i = 0; i < nm; ++i) {
        const std::string_view s = gguf_get_arr_str(g, mk, i);
        const std::string field = "tokenizer.ggml.merges[" + std::to_string(i) + "]";
        const size_t sp = s.find(' ');
        if (sp == std::string::npos || sp == 0 || sp + 1 >= s.size()) bad_field(origin, field, "is not of the form 'a b'");
        auto id_of = [&](std::string_view tok) {
            auto it = impl->text_to_id.find(tok);
            if (it == impl->text_to_id.end())
                bad_field(origin, field, "names token '" + std::string(tok) + "' that is not in the vocabulary");
            return it->second;
        };
        const std::string joined = std::string(s.substr(0, sp)) + std::string(s.substr(sp + 1));
        const int32_t a = id_of(s.substr(0, sp));
        const int32_t b = id_of(s.substr(sp + 1));
        impl->add_merge(a, b, static_cast<int32_t>(i), id_of(joined));
    }
    return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_ranked_bytes(std::vector<std::string> token_bytes) {
    auto impl = std::make_unique<Impl>();
    impl->origin = "ranked byte vocabulary";
    impl->tokens.resize(token_bytes.size());
    for (size_t i = 0; i < token_bytes.size(); ++i) {
        std::string text = byte_level_encode(token_bytes[i]);
        impl->tokens[i] = {std::move(token_bytes[i]), std::move(text), TokenKind::Normal};
    }
    impl->index("token_bytes");
    if (impl->bytes_to_id.size() != impl->tokens.size())
        throw Error(ErrorKind::InvalidModel, impl->origin + ": two tokens have the same bytes");
    for (size_t i = 0; i < impl->tokens.size(); ++i) {
        const std::string_view b = impl->tokens[i].bytes;
        for (size_t k = 1; k < b.size(); ++k) {
            auto l = impl->bytes_to_id.find(b.substr(0, k));
            if (l == impl->bytes_to_id.end()) continue;
            auto r = impl->bytes_to_id.find(b.substr(k));
            if (r == impl->bytes_to_id.end()) continue;
            const auto id = static_cast<int32_t>(i);
            impl->add_merge(l->second, r->second, id, id);
        }
    }
    Stage split;
    split.regex = compile_regex(kGpt2Pattern, false, impl->origin);
    impl->stages.push_back(std::move(split));
    return Tokenizer(std::move(impl));
}

void Tokenizer::add_special_token(std::string content, int32_t id) {
    if (id < 0) throw Error(ErrorKind::InvalidArgument, "special token id " + std::to_string(id) + " is negative");
    if (content.empty()) throw Error(ErrorKind::InvalidArgument, "special token content is empty");
    Impl& im = *impl_;
    if (static_cast<size_t>(id) < im.tokens.size()) {
        TokenInfo& t = im.tokens[id];
        const bool same = t.bytes == content || t.text == content;
        if (t.kind != TokenKind::Hole && !same)
            throw Error(ErrorKind::InvalidArgument, "token id " + std::to_string(id) + " already holds '" +
                                                        t.text + "', not '" + content + "'");
        // A vocabulary token becoming special is no longer produced by BPE (tiktoken keeps special
        // tokens out of its mergeable ranks), only by matching its content with parse_special.
        if (t.kind == TokenKind::Normal) {
            if (auto it = im.bytes_to_id.find(t.bytes); it != im.bytes_to_id.end() && it->second == id)
                im.bytes_to_id.erase(it);
            std::erase_if(im.merges, [id](const auto& kv) { return kv.second.id == id; });
        }
        t.kind = TokenKind::Special;
        t.bytes = content;
        t.text = std::move(content);
    } else {
        im.set_token(id, {content, content, TokenKind::Special});
    }
    im.added.insert(im.tokens[id].text, id);
    im.text_to_id[im.tokens[id].text] = id;
    std::lock_guard lock(im.cache_mu);
    im.cache.clear();
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special) const {
    const Impl& im = *impl_;
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 1);
    if (im.added.empty()) {
        im.encode_segment(text, out);
        return out;
    }
    auto accept = [&](int32_t id) { return parse_special || im.tokens[id].kind != TokenKind::Special; };
    size_t start = 0;
    for (size_t pos = 0; pos < text.size();) {
        const auto [len, id] = im.added.longest(text, pos, accept);
        if (len == 0) {
            ++pos;
            continue;
        }
        im.encode_segment(text.substr(start, pos - start), out);
        out.push_back(id);
        pos += len;
        start = pos;
    }
    im.encode_segment(text.substr(start), out);
    return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
    std::string out;
    for (int32_t id : ids) {
        const TokenInfo& t = impl_->checked(id);
        if (skip_special && t.kind == TokenKind::Special) continue;
        out += t.bytes;
    }
    return out;
}

std::string Tokenizer::token_bytes(int32_t id) const { return impl_->checked(id).bytes; }

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token_text) const {
    auto it = impl_->text_to_id.find(token_text);
    if (it == impl_->text_to_id.end()) return std::nullopt;
    return it->second;
}

std::string Tokenizer::id_to_token(int32_t id) const { return impl_->checked(id).text; }

size_t Tokenizer::vocab_size() const { return impl_->tokens.size(); }

bool Tokenizer::is_special(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < impl_->tokens.size() &&
           impl_->tokens[id].kind == TokenKind::Special;
}

}  // namespace parlance
