// Scheduling classes, most urgent first. Every engine orders its waiting work by (class, arrival)
// and hands its scarce resources — admission, encoder passes, KV blocks — to the more urgent class
// first: a live caption's final decode before an upload, an upload before a bulk job.
#pragma once

namespace parlance {

enum class Priority : int {
    Live = 0,         // a live session's decode that decides an item's text
    Interactive = 1,  // a request someone is waiting for (the default)
    Bulk = 2,         // work nobody watches as it runs (OpenAI's service_tier "flex")
};

}  // namespace parlance
