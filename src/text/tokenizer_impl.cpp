// The byte-level BPE encoder shared by every loader: byte-level table, pre-tokenizer regex
// splits, merges (with a word cache), and the error helpers the loaders' messages share.
#include "text/tokenizer_impl.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <queue>

#include "core/error.h"
#include "text/utf8.h"

namespace parlance {
namespace tokenizer_detail {

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

[[noreturn]] void bad_field(const std::string& origin, std::string_view field,
                            std::string_view why) {
    throw Error(ErrorKind::InvalidModel,
                origin + ": field '" + std::string(field) + "' " + std::string(why));
}

[[noreturn]] void unsupported(const std::string& origin, std::string_view field,
                              std::string_view what) {
    throw Error(ErrorKind::Unsupported, origin + ": field '" + std::string(field) +
                                            "': " + std::string(what) + " is not supported");
}

}  // namespace tokenizer_detail

using namespace tokenizer_detail;

void Tokenizer::Impl::set_token(int32_t id, TokenInfo info) {
    if (id < 0) throw Error(ErrorKind::InvalidModel, origin + ": negative token id");
    if (static_cast<size_t>(id) >= tokens.size()) tokens.resize(static_cast<size_t>(id) + 1);
    tokens[id] = std::move(info);
}

// Builds bytes_to_id, byte_id and text_to_id from tokens; checks for duplicates.
void Tokenizer::Impl::index(std::string_view field) {
    bytes_to_id.reserve(tokens.size());
    text_to_id.reserve(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) {
        const TokenInfo& t = tokens[i];
        const auto id = static_cast<int32_t>(i);
        if (t.kind == TokenKind::Hole) continue;
        if (t.kind == TokenKind::Normal) {
            if (t.bytes.empty())
                throw Error(ErrorKind::InvalidModel, origin + ": " + std::string(field) +
                                                         ": token " + std::to_string(id) +
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

void Tokenizer::Impl::rebuild_added() {
    added = AddedTrie();
    for (size_t i = 0; i < tokens.size(); ++i) {
        const TokenInfo& t = tokens[i];
        if ((t.kind == TokenKind::Added || t.kind == TokenKind::Special) && !t.text.empty())
            added.insert(t.text, static_cast<int32_t>(i));
        if (t.kind == TokenKind::Added || t.kind == TokenKind::Special)
            text_to_id[t.text] = static_cast<int32_t>(i);
    }
}

void Tokenizer::Impl::add_merge(int32_t a, int32_t b, int32_t rank, int32_t id) {
    merges.emplace(pair_key(a, b), Merge{rank, id});  // first (lowest rank) wins
}

void Tokenizer::Impl::bpe(std::string_view word, std::vector<int32_t>& out) const {
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
std::vector<int32_t> Tokenizer::Impl::merge_word(std::string_view word) const {
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
void Tokenizer::Impl::split(const Stage& stage, pcre2_match_data* md, std::string_view piece,
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
void Tokenizer::Impl::encode_text(std::string_view text, std::vector<int32_t>& out) const {
    if (text.empty()) return;
    std::string normalized;
    if (nfc && std::any_of(text.begin(), text.end(), [](char c) { return c & 0x80; })) {
        utf8proc_uint8_t* dst = nullptr;
        const utf8proc_ssize_t n =
            utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                         static_cast<utf8proc_ssize_t>(text.size()), &dst,
                         static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
        if (n < 0) {
            throw Error(ErrorKind::Internal, origin + ": NFC failed: " + utf8proc_errmsg(n));
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
                    // Built by append: GCC 12 warns (-Wrestrict, a false positive) on " " + string.
                    std::string& spaced = arena.emplace_back(1, ' ');
                    spaced.append(p);
                    next.push_back(spaced);
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
void Tokenizer::Impl::encode_segment(std::string_view seg, std::vector<int32_t>& out) const {
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

const TokenInfo& Tokenizer::Impl::checked(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= tokens.size() || tokens[id].kind == TokenKind::Hole) {
        throw Error(ErrorKind::InvalidArgument, "token id " + std::to_string(id) +
                                                    " is not in the vocabulary (size " +
                                                    std::to_string(tokens.size()) + ")");
    }
    return tokens[id];
}

}  // namespace parlance
