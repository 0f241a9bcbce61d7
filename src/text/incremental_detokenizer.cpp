// Streaming UTF-8-safe detokenization (see incremental_detokenizer.h).
#include "text/incremental_detokenizer.h"

#include "text/utf8.h"

namespace parlance {

std::string IncrementalDetokenizer::push(int32_t id) {
    if (skip_special_ && tokenizer_.is_special(id)) return {};
    pending_ += tokenizer_.token_bytes(id);
    std::string out;
    size_t pos = 0;
    while (pos < pending_.size()) {
        const utf8::Scan s = utf8::scan(pending_, pos);
        if (s.status == utf8::Scan::Status::Incomplete) break;  // may complete with the next token
        if (s.status == utf8::Scan::Status::Valid) {
            out.append(pending_, pos, s.length);
        } else {
            utf8::append(out, U'\uFFFD');
        }
        pos += s.length;
    }
    pending_.erase(0, pos);
    return out;
}

std::string IncrementalDetokenizer::flush() {
    std::string out = utf8::sanitize(pending_);
    pending_.clear();
    return out;
}

}  // namespace parlance
