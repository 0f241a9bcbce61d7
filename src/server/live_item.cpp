// One item of a live transcription session (see live_item.h).
#include "server/live_item.h"

#include <algorithm>
#include <string_view>

namespace parlance::server {

LiveItem::Closing LiveItem::close(int64_t end_at, int64_t speech_end_at, double now) {
    end = std::max(end_at, start);
    speech_end = std::clamp(speech_end_at, start, end);
    committed = true;
    closed_at = now;
    if (decoding) {
        await_interim = true;  // decided when it lands (interim_landed)
        return Closing::AwaitInterim;
    }
    return hypothesis_end >= speech_end ? Closing::Complete : Closing::DecodeFinal;
}

LiveItem::Interim LiveItem::interim_landed(const Transcript* result, int64_t end_at, size_t stable) {
    decoding = false;
    if (result) {
        hypothesis = result->text;
        hypothesis_end = end_at;
        hypothesis_tokens = result->segments.empty() ? std::vector<int>() : result->segments.front().tokens;
    }
    if (committed) {
        // The item ended while this decode ran: final if it covered the speech.
        if (await_interim && result && end_at >= speech_end) return {Interim::Next::Complete, {}};
        return {Interim::Next::DecodeFinal, {}};
    }
    if (!result) return {Interim::Next::Open, {}};
    std::string delta = policy.update(result->text, stable);
    if (!delta.empty()) tentative_sent.clear();  // a client drops its tentative text on a delta
    return {Interim::Next::Open, std::move(delta)};
}

std::optional<std::string> LiveItem::tentative_update() {
    std::string text = policy.tentative();
    if (text == tentative_sent) return std::nullopt;
    tentative_sent = text;
    return text;
}

size_t stable_prefix(const Transcript& t, double limit, double min_probability) {
    size_t stable = 0, pos = 0;
    for (const Segment& s : t.segments)
        for (const Word& w : s.words) {
            const size_t b = w.word.find_first_not_of(" \t\r\n");
            const size_t e = w.word.find_last_not_of(" \t\r\n");
            if (b == std::string::npos) continue;
            const size_t at = t.text.find(std::string_view(w.word).substr(b, e - b + 1), pos);
            if (at == std::string::npos || w.end > limit || w.probability < min_probability) return stable;
            pos = at + (e - b + 1);
            stable = pos;
        }
    return stable;
}

}  // namespace parlance::server
