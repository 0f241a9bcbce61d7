// Readers of a JSON request's fields that refuse what is wrong with a 400 naming the field, in
// OpenAI's error shape: shared by every JSON endpoint (chat, completions, Anthropic messages).
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

namespace parlance::server::fields {

using nlohmann::ordered_json;

[[noreturn]] void refuse(const std::string& param, const std::string& message,
                         const std::string& code = "invalid_value");

// The body as a JSON object (400 when it is not).
ordered_json parse_object(const std::string& body);
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

}  // namespace parlance::server::fields
