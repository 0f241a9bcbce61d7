// StopStrings (see stop_strings.h).
#include "text/stop_strings.h"

#include <algorithm>

namespace parlance {

StopStrings::StopStrings(std::vector<std::string> stops) : stops_(std::move(stops)) {
    stops_.erase(std::remove(stops_.begin(), stops_.end(), std::string()), stops_.end());
}

std::string StopStrings::push(std::string_view text) {
    if (matched_) return {};
    pending_.append(text);
    // The earliest stop string wins (the longest among those starting at the same place).
    size_t best = std::string::npos;
    for (const std::string& s : stops_) {
        const size_t at = pending_.find(s);
        if (at != std::string::npos && (at < best || (at == best && s.size() > which_.size()))) {
            best = at;
            which_ = s;
        }
    }
    if (best != std::string::npos) {
        matched_ = true;
        std::string out = pending_.substr(0, best);
        pending_.clear();
        return out;
    }
    // Hold back the longest tail that is the start of some stop string.
    size_t hold = 0;
    for (const std::string& s : stops_) {
        const size_t most = std::min(s.size() - 1, pending_.size());
        for (size_t n = most; n > hold; --n)
            if (pending_.compare(pending_.size() - n, n, s, 0, n) == 0) {
                hold = n;
                break;
            }
    }
    std::string out = pending_.substr(0, pending_.size() - hold);
    pending_.erase(0, pending_.size() - hold);
    return out;
}

std::string StopStrings::flush() {
    std::string out;
    out.swap(pending_);
    return matched_ ? std::string() : out;
}

}  // namespace parlance
