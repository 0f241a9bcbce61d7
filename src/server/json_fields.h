// Readers of a JSON request's fields that refuse what is wrong with a 400 naming the field, in
// OpenAI's error shape: shared by every JSON endpoint (chat, completions, Anthropic messages).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/priority.h"

namespace parlance::server::fields {

using nlohmann::ordered_json;

[[noreturn]] void refuse(const std::string& param, const std::string& message,
                         const std::string& code = "invalid_value");

// The body as a JSON object (400 when it is not, or when it nests deeper than kMaxJsonDepth).
ordered_json parse_object(const std::string& body);
// Any JSON text a client sent inside a request (a tool call's arguments, a form field): refused
// with a 400 naming `param` when it nests deeper than kMaxJsonDepth ("json_too_deep"); otherwise
// the parsed value, discarded when it is not JSON.
ordered_json parse_json(const std::string& text, const std::string& param, const std::string& what);
// The compact text of a response body or stream event; invalid UTF-8 in a string (a model's
// partial character) is replaced, never thrown.
std::string dump(const ordered_json& j);
// Refuses the first key of `j` not in `known` ("unrecognized request argument supplied").
void only_known(const ordered_json& j, const std::set<std::string>& known, const std::string& where = "");
// True when `j` has `key` with a non-null value.
bool has(const ordered_json& j, const char* key);

double number(const ordered_json& v, const std::string& param, double lo, double hi);
int integer(const ordered_json& v, const std::string& param, int64_t lo, int64_t hi);
bool boolean(const ordered_json& v, const std::string& param);
std::string string(const ordered_json& v, const std::string& param);
uint64_t seed(const ordered_json& v, const std::string& param);
// A string or an array of at most `max` non-empty strings of at most 256 bytes.
std::vector<std::string> stop_strings(const ordered_json& v, const std::string& param, size_t max);

// The sampling controls OpenAI's chat and text completions share (with vLLM's extensions).
struct Sampling {
    int min_tokens = 0;
    bool ignore_eos = false;
    float temperature = 1.0f, top_p = 1.0f, min_p = 0.0f;
    int top_k = 0;
    float presence_penalty = 0.0f, frequency_penalty = 0.0f, repetition_penalty = 1.0f;
    std::optional<uint64_t> seed;
    std::vector<std::string> stop;
    Priority priority = Priority::Interactive;  // service_tier: "flex" is Bulk, the others Interactive
};
// Reads those of `j`'s fields that are present: min_tokens, ignore_eos, temperature (0..2),
// top_p, top_k (-1 = all), min_p, the three penalties, seed, stop (at most `max_stop`), service_tier.
void read_sampling(const ordered_json& j, Sampling& s, size_t max_stop);
// OpenAI's service_tier as a scheduling class: "flex" (cheaper, slower) is Bulk; "auto",
// "default" and "priority" are Interactive; anything else is refused naming the field.
Priority service_tier(const std::string& tier);
// `known` and the names read_sampling reads, for only_known().
std::set<std::string> with_sampling(std::set<std::string> known);

}  // namespace parlance::server::fields
