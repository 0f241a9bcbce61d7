// How deeply a JSON text nests, found by one scan of its brackets outside strings, before any
// parser builds a value from it. nlohmann's parser is iterative, but everything done with a value
// afterwards recurses once per level — copying, dumping, schema conversion, the chat template's
// tojson — so a 50,000-deep array in a 200 KB body overflows a thread's stack. Every JSON text a
// client (or a model) hands the server is measured here first and refused past the limit.
#pragma once

#include <string_view>

namespace parlance {

// Request bodies, WebSocket events, tool-call arguments and model output: far deeper than any
// real schema or conversation (OpenAI's structured outputs allow 10 levels of schema nesting), far
// shallower than the stack a worker thread has (each level costs a few frames of recursion).
inline constexpr int kMaxJsonDepth = 64;

// The deepest nesting of arrays and objects in `text`, scanning no further once it passes
// `stop_after` (so a hostile text costs at most one pass). Text that is not JSON gets some count;
// the parser refuses it afterwards.
int json_depth(std::string_view text, int stop_after = kMaxJsonDepth);

// True when `text` nests at most `max_depth` levels.
inline bool json_within_depth(std::string_view text, int max_depth = kMaxJsonDepth) {
    return json_depth(text, max_depth) <= max_depth;
}

}  // namespace parlance
