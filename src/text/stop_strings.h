// Stop strings over streamed text (OpenAI's `stop`): text goes out as it comes, except a tail
// that could still become a stop string, which is held back until it does or cannot; a stop
// string is never emitted, even when it spans several tokens.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace parlance {

class StopStrings {
public:
    explicit StopStrings(std::vector<std::string> stops);

    // Appends generated text; returns what may be shown now. After a match, matched() is true,
    // the text before the stop string has been returned and everything later is dropped.
    std::string push(std::string_view text);
    // The end of the generation: what was held back (nothing after a match).
    std::string flush();
    bool matched() const { return matched_; }
    const std::string& which() const { return which_; }  // the stop string that matched

private:
    std::vector<std::string> stops_;
    std::string pending_;
    bool matched_ = false;
    std::string which_;
};

}  // namespace parlance
