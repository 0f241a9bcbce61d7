// The token level over llama-grammar's code-point level: llama_grammar_reject_candidates_for_stack
// (one parse stack at a time; a token is rejected when every stack rejects it) and
// llama_grammar_accept_token. The vocabulary-level entry points of llama-grammar are not used: they
// read a llama_vocab, parlance has its own tokenizer.
#include "text/grammar_constraint.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <unordered_set>

#include "core/error.h"
#include "llama-grammar.h"
#include "text/grammar_glue.h"

namespace parlance {

namespace {

// UTF-8 bytes to code points, continuing from a character a previous token left unfinished; the
// list ends with a 0, and the state says what the last character still needs (n_remain > 0),
// or that the bytes are not UTF-8 (n_remain = -1, no code points). llama-grammar's candidates
// and accept_token use this representation.
struct Decoded {
    std::vector<uint32_t> code_points;
    llama_partial_utf8 partial{0, 0};
};

Decoded decode_utf8(const std::string& bytes, llama_partial_utf8 from) {
    Decoded d;
    d.code_points.reserve(bytes.size() + 1);
    uint32_t value = from.value;
    int remain = from.n_remain;
    for (unsigned char b : bytes) {
        if (remain > 0) {
            if ((b & 0xC0) != 0x80) return {{0}, {0, -1}};
            value = (value << 6) | (b & 0x3Fu);
            if (--remain == 0) d.code_points.push_back(value);
            continue;
        }
        if (b < 0x80) {
            d.code_points.push_back(b);
            continue;
        }
        // A lead byte: 110xxxxx, 1110xxxx, 11110xxx; a continuation byte here is invalid.
        if ((b & 0xE0) == 0xC0) {
            value = b & 0x1Fu, remain = 1;
        } else if ((b & 0xF0) == 0xE0) {
            value = b & 0x0Fu, remain = 2;
        } else if ((b & 0xF8) == 0xF0) {
            value = b & 0x07u, remain = 3;
        } else {
            return {{0}, {0, -1}};
        }
    }
    d.code_points.push_back(0);
    d.partial = {remain > 0 ? value : 0, remain};
    return d;
}

}  // namespace

struct GrammarVocabulary::Impl {
    size_t rows = 0;
    std::vector<int32_t> end_ids;
    std::vector<char> is_end;        // [rows]
    std::vector<std::string> bytes;  // [rows]; empty: never allowed
    // Decoded from a clean state (what almost every step needs): code points of token i at
    // points[offset[i]], 0-terminated.
    std::vector<uint32_t> points;
    std::vector<size_t> offset;
    std::vector<llama_partial_utf8> partial;
    std::vector<char> usable;  // has bytes and decodes from a clean state (else: only after a partial character)
};

GrammarVocabulary::GrammarVocabulary(const Tokenizer& tok, size_t rows, std::vector<int32_t> end_ids)
    : impl_(std::make_unique<Impl>()) {
    Impl& v = *impl_;
    v.rows = rows;
    v.end_ids = std::move(end_ids);
    v.is_end.assign(rows, 0);
    for (int32_t id : v.end_ids)
        if (id >= 0 && static_cast<size_t>(id) < rows) v.is_end[static_cast<size_t>(id)] = 1;
    v.bytes.resize(rows);
    v.offset.resize(rows);
    v.partial.resize(rows);
    v.usable.assign(rows, 0);
    const size_t known = std::min(rows, tok.vocab_size());
    for (size_t i = 0; i < rows; ++i) {
        v.offset[i] = v.points.size();
        const auto id = static_cast<int32_t>(i);
        if (i < known && !v.is_end[i] && !tok.is_special(id)) {
            try {
                v.bytes[i] = tok.token_bytes(id);
            } catch (const Error&) {  // a hole in the ids
            }
        }
        Decoded d = decode_utf8(v.bytes[i], {0, 0});
        v.usable[i] = !v.bytes[i].empty() && v.bytes[i][0] != 0 && d.partial.n_remain >= 0;
        v.partial[i] = d.partial;
        v.points.insert(v.points.end(), d.code_points.begin(), d.code_points.end());
    }
}

GrammarVocabulary::~GrammarVocabulary() = default;

namespace {

struct GrammarDeleter {
    void operator()(llama_grammar* g) const { llama_grammar_free_impl(g); }
};
using GrammarPtr = std::unique_ptr<llama_grammar, GrammarDeleter>;

class GrammarConstraint final : public TokenConstraint {
public:
    GrammarConstraint(GrammarPtr g, std::shared_ptr<const GrammarVocabulary> vocab, size_t max_stacks)
        : g_(std::move(g)), vocab_(std::move(vocab)), v_(vocab_->impl()), max_stacks_(max_stacks) {}

    std::unique_ptr<TokenConstraint> clone() const override {
        return std::make_unique<GrammarConstraint>(GrammarPtr(llama_grammar_clone_impl(*g_)), vocab_, max_stacks_);
    }

    bool allows(int32_t token) const override {
        if (token < 0 || static_cast<size_t>(token) >= v_.rows) return false;
        const auto t = static_cast<size_t>(token);
        if (v_.is_end[t]) return can_end();
        if (v_.bytes[t].empty() || (clean() && !v_.usable[t])) return false;
        Decoded scratch;
        const llama_grammar_candidates c{candidate(t, scratch)};
        if (c[0].partial_utf8.n_remain < 0) return false;
        // Allowed when some parse stack accepts it (rejects nothing of the one candidate).
        for (const auto& stack : g_->stacks)
            if (llama_grammar_reject_candidates_for_stack(g_->rules, stack, c).empty()) return true;
        return false;
    }

    void mask(std::span<float> logits) const override {
        const float neg_inf = -std::numeric_limits<float>::infinity();
        const bool end_ok = can_end();
        const bool at_clean = clean();
        // The candidate list and the code points of a split character are kept between calls:
        // a vocabulary of 151k tokens is masked on every step a greedy choice is not allowed.
        if (!at_clean) scratch_.resize(v_.rows);
        candidates_.clear();
        candidates_.reserve(v_.rows);
        for (size_t t = 0; t < logits.size(); ++t) {
            const bool impossible =
                t >= v_.rows || (v_.is_end[t] ? !end_ok : v_.bytes[t].empty() || (at_clean && !v_.usable[t]));
            if (impossible) {
                logits[t] = neg_inf;
                continue;
            }
            if (v_.is_end[t]) continue;
            candidates_.push_back(candidate(t, at_clean ? scratch_unused_ : scratch_[t]));
            if (candidates_.back().partial_utf8.n_remain < 0) {
                logits[t] = neg_inf;
                candidates_.pop_back();
            }
        }
        drop_unreachable_first_chars(logits);
        for (const llama_grammar_candidate& r : reject(candidates_)) logits[r.index] = neg_inf;
    }

    void accept(int32_t token) override {
        // The caller checked allows(token) (not again here: it is on every generated token's
        // path); a refused token makes llama-grammar throw below rather than corrupt the parse.
        if (token < 0 || static_cast<size_t>(token) >= v_.rows)
            throw Error(ErrorKind::Internal, "structured output: token " + std::to_string(token) + " is out of range");
        const auto t = static_cast<size_t>(token);
        if (v_.is_end[t]) return;
        try {
            llama_grammar_accept_token(*g_, token, v_.bytes.at(t));
        } catch (const std::runtime_error& e) {
            throw Error(ErrorKind::Internal, std::string("structured output: ") + e.what());
        }
        // An ambiguous grammar can multiply its parses token by token: the first max_stacks_ are
        // kept (each is a valid parse, so the output stays in the language).
        if (g_->stacks.size() > max_stacks_) g_->stacks.resize(max_stacks_);
    }

private:
    // No character is unfinished (the last token did not end inside one).
    bool clean() const { return g_->partial_utf8.n_remain == 0; }
    bool can_end() const {
        if (!clean()) return false;
        return std::any_of(g_->stacks.begin(), g_->stacks.end(), [](const auto& s) { return s.empty(); });
    }

    // Token t as a candidate; `scratch` holds its code points when the grammar's last token left
    // a character unfinished (the shared clean decoding does not apply then).
    llama_grammar_candidate candidate(size_t t, Decoded& scratch) const {
        const auto id = static_cast<llama_token>(t);
        if (clean()) return {t, v_.points.data() + v_.offset[t], v_.partial[t], id};
        scratch = decode_utf8(v_.bytes[t], g_->partial_utf8);
        return {t, scratch.code_points.data(), scratch.partial, id};
    }

    // A candidate whose first code point no stack's next character takes is refused by every
    // stack. One pass with a bitmap of the code points the stacks' tops take leaves only the rest
    // to the per-stack matching, which costs (stacks x candidates): with a 1,000-value enum's
    // stacks the whole-vocabulary mask took 0.37 s a step, held on the engine's thread.
    void drop_unreachable_first_chars(std::span<float> logits) const {
        constexpr uint32_t kCodePoints = 0x110000;
        first_.assign(kCodePoints / 64, 0);
        tops_.clear();
        auto set = [&](std::vector<uint64_t>& bits, uint32_t lo, uint32_t hi) {
            for (uint32_t c = lo; c <= std::min(hi, kCodePoints - 1); ++c) {
                if (c % 64 == 0 && c + 63 <= hi && c + 63 < kCodePoints) {
                    bits[c / 64] = ~uint64_t{0};
                    c += 63;
                } else {
                    bits[c / 64] |= uint64_t{1} << (c % 64);
                }
            }
        };
        for (const auto& stack : g_->stacks) {
            if (stack.empty()) continue;  // a complete parse takes no code point
            const llama_grammar_element* pos = stack.back();
            if (pos->type == LLAMA_GRETYPE_TOKEN || pos->type == LLAMA_GRETYPE_TOKEN_NOT) return;  // not by chars
            if (!tops_.insert(pos).second) continue;
            // The top's character set, read as llama-grammar's match_char reads it.
            const bool negated = pos->type == LLAMA_GRETYPE_CHAR_NOT;
            std::vector<uint64_t>& bits = negated ? negated_ : first_;
            if (negated) negated_.assign(kCodePoints / 64, 0);
            const llama_grammar_element* p = pos;
            do {
                if (p[1].type == LLAMA_GRETYPE_CHAR_RNG_UPPER) {
                    if (p->value <= p[1].value) set(bits, p->value, p[1].value);
                    p += 2;
                } else if (p->type == LLAMA_GRETYPE_CHAR_ANY) {
                    set(bits, 0, kCodePoints - 1);
                    p += 1;
                } else {
                    set(bits, p->value, p->value);
                    p += 1;
                }
            } while (p->type == LLAMA_GRETYPE_CHAR_ALT);
            if (negated)
                for (size_t w = 0; w < first_.size(); ++w) first_[w] |= ~negated_[w];
        }
        kept_.clear();
        for (const llama_grammar_candidate& c : candidates_) {
            const uint32_t cp = *c.code_points;
            if (cp != 0 && cp < kCodePoints && !((first_[cp / 64] >> (cp % 64)) & 1))
                logits[c.index] = -std::numeric_limits<float>::infinity();
            else
                kept_.push_back(c);  // a possible first character, or a token that is all partial UTF-8
        }
        candidates_.swap(kept_);
    }

    // The candidates no parse stack accepts (each stack filters what the previous ones refused,
    // so only the first pass reads the whole list).
    llama_grammar_candidates reject(const llama_grammar_candidates& all) const {
        if (g_->stacks.empty()) return all;
        llama_grammar_candidates c = llama_grammar_reject_candidates_for_stack(g_->rules, g_->stacks[0], all);
        for (size_t i = 1; i < g_->stacks.size() && !c.empty(); ++i)
            c = llama_grammar_reject_candidates_for_stack(g_->rules, g_->stacks[i], c);
        return c;
    }

    GrammarPtr g_;
    std::shared_ptr<const GrammarVocabulary> vocab_;
    const GrammarVocabulary::Impl& v_;
    mutable Decoded scratch_unused_;
    mutable std::vector<Decoded> scratch_;         // code points when a character is split
    mutable llama_grammar_candidates candidates_;  // mask()'s candidate list
    // drop_unreachable_first_chars' scratch: the code points some stack's top takes, one negated
    // top's set, the tops seen, the candidates kept.
    mutable std::vector<uint64_t> first_, negated_;
    mutable std::unordered_set<const llama_grammar_element*> tops_;
    mutable llama_grammar_candidates kept_;
    size_t max_stacks_;
};

GrammarPtr parse_grammar(const std::string& gbnf) {
    llama_grammar_take_log();
    GrammarPtr g(llama_grammar_init_impl(nullptr, gbnf.c_str(), "root", false, nullptr, 0, nullptr, 0));
    if (!g) {
        std::string why = llama_grammar_take_log();
        while (!why.empty() && why.back() == '\n') why.pop_back();
        throw Error(ErrorKind::InvalidArgument, "the output grammar does not parse" + (why.empty() ? "" : ": " + why));
    }
    if (g->stacks.empty()) throw Error(ErrorKind::InvalidArgument, "the output grammar accepts nothing");
    return g;
}

}  // namespace

std::unique_ptr<TokenConstraint> make_grammar_constraint(const std::string& gbnf,
                                                         std::shared_ptr<const GrammarVocabulary> vocabulary,
                                                         size_t max_stacks) {
    GrammarPtr g = parse_grammar(gbnf);
    if (g->stacks.size() > max_stacks)
        throw Error(ErrorKind::InvalidArgument, "the output grammar opens with " + std::to_string(g->stacks.size()) +
                                                    " alternatives at once, over the limit of " +
                                                    std::to_string(max_stacks) +
                                                    " (serve --schema-max-grammar-stacks)");
    return std::make_unique<GrammarConstraint>(std::move(g), std::move(vocabulary), max_stacks);
}

size_t grammar_start_stacks(const std::string& gbnf) {
    return parse_grammar(gbnf)->stacks.size();
}

}  // namespace parlance
