// The commit policy of live transcription (see commit_policy.h).
#include "decoding/commit_policy.h"

#include <algorithm>
#include <map>

#include <utf8proc.h>

#include "decoding/repetition.h"
#include "text/utf8.h"

namespace parlance {
namespace {

// Scripts written without spaces between words: every character is a unit of its own.
bool unspaced(char32_t c) {
    return (c >= 0x2E80 && c <= 0x9FFF) ||    // CJK radicals, kana, CJK unified ideographs
           (c >= 0xF900 && c <= 0xFAFF) ||    // CJK compatibility ideographs
           (c >= 0x20000 && c <= 0x2FFFF) ||  // CJK extensions
           (c >= 0x0E00 && c <= 0x0EFF) ||    // Thai, Lao
           (c >= 0x1000 && c <= 0x109F) ||    // Myanmar
           (c >= 0x1780 && c <= 0x17FF);      // Khmer
}

bool is_space(char32_t c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' ||
           utf8proc_category(static_cast<utf8proc_int32_t>(c)) == UTF8PROC_CATEGORY_ZS;
}

bool is_punctuation(char32_t c) {
    const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
    return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

void add_folded(std::string& key, char32_t c) {
    if (is_punctuation(c)) return;
    const utf8proc_int32_t lower = utf8proc_tolower(static_cast<utf8proc_int32_t>(c));
    utf8::append(key, static_cast<char32_t>(lower));
}

// A loop at the end of a hypothesis (the same n-gram of units four times or more in a row) is
// cut back to its first occurrence, so a decoder's rut is never committed.
size_t loop_free(const std::vector<CommitPolicy::Unit>& u) {
    std::map<std::string, int> ids;
    std::vector<int> seq;
    seq.reserve(u.size());
    for (const auto& x : u) seq.push_back(ids.emplace(x.key, static_cast<int>(ids.size())).first->second);
    return repetition_cut(seq, 4, 8);
}

}  // namespace

std::vector<CommitPolicy::Unit> CommitPolicy::units(std::string_view text) {
    std::vector<Unit> out;
    std::string space;  // whitespace before the next unit
    bool in_word = false;
    for (size_t pos = 0; pos < text.size();) {
        const utf8::Scan s = utf8::scan(text, pos);
        const std::string_view bytes = text.substr(pos, s.length);
        const char32_t c = s.status == utf8::Scan::Status::Valid ? s.code_point : 0xFFFD;
        pos += s.length;
        if (is_space(c)) {
            space.append(bytes);
            in_word = false;
            continue;
        }
        // A unit starts after whitespace, at a word start, and at every character of an unspaced
        // script; punctuation right after a unit stays with it ("not," and "文。").
        const bool starts = out.empty() || !space.empty() || (!is_punctuation(c) && (unspaced(c) || !in_word));
        if (starts) {
            out.push_back({space, ""});
            space.clear();
        }
        out.back().raw.append(bytes);
        add_folded(out.back().key, c);
        in_word = !unspaced(c) && !is_punctuation(c) ? true : (in_word && is_punctuation(c));
    }
    return out;  // trailing whitespace belongs to no unit: the next unit brings its own
}

std::string CommitPolicy::append(const std::vector<Unit>& u, size_t from, size_t to) {
    std::string delta;
    for (size_t i = from; i < to; ++i) delta += u[i].raw;
    // The segment's text starts without whitespace (Whisper's segments begin with a space).
    if (committed_.empty()) delta.erase(0, delta.find_first_not_of(" \t\r\n"));
    committed_ += delta;
    committed_units_ = static_cast<int>(to);
    return delta;
}

std::string CommitPolicy::update(std::string_view hypothesis, size_t stable_bytes) {
    if (finished_) return "";
    std::vector<Unit> now = units(hypothesis);
    now.resize(loop_free(now));
    // Units that end inside the stable prefix: the units' raw texts are the hypothesis's bytes in
    // order (each with the whitespace before it), so their lengths add up to each one's end.
    size_t stable_units = now.size();
    if (stable_bytes != std::string_view::npos) {
        stable_units = 0;
        size_t at = 0;
        for (const Unit& u : now) {
            at += u.raw.size();
            if (at > stable_bytes) break;
            ++stable_units;
        }
    }
    // Agreement is looked for past what is committed: earlier units are final whatever a new
    // hypothesis says about them. The last held_back units of every hypothesis are held back.
    const size_t from = static_cast<size_t>(committed_units_);
    const size_t keep = static_cast<size_t>(std::max(o_.held_back, 0));
    size_t agreed = from;
    if (static_cast<int>(recent_.size()) + 1 >= o_.agreement) {
        size_t limit = std::min(now.size() > keep ? now.size() - keep : 0, stable_units);
        for (const auto& h : recent_) limit = std::min(limit, h.size() > keep ? h.size() - keep : 0);
        auto same = [&](size_t i) {
            for (const auto& h : recent_)
                if (h[i].key != now[i].key) return false;
            return true;
        };
        while (agreed < limit && same(agreed)) ++agreed;
    }
    std::string delta;
    if (agreed > from) delta = append(now, from, agreed);
    previous_ = now;
    if (o_.agreement > 1) {
        recent_.push_back(std::move(now));
        if (static_cast<int>(recent_.size()) > o_.agreement - 1) recent_.erase(recent_.begin());
    }
    return delta;
}

std::string CommitPolicy::tentative() const {
    if (finished_) return "";
    std::string text;
    for (size_t i = static_cast<size_t>(committed_units_); i < previous_.size(); ++i) text += previous_[i].raw;
    // Like a delta, the segment's text starts without whitespace.
    if (committed_.empty()) text.erase(0, text.find_first_not_of(" \t\r\n"));
    return text;
}

std::string CommitPolicy::finalize(std::string_view final_text) {
    if (finished_) return "";
    finished_ = true;
    const std::vector<Unit> last = units(final_text);
    const size_t from = std::min(static_cast<size_t>(committed_units_), last.size());
    return from < last.size() ? append(last, from, last.size()) : std::string();
}

}  // namespace parlance
