// JSON field readers (see json_fields.h).
#include "server/json_fields.h"

#include <algorithm>
#include <cmath>

#include "server/api_error.h"
#include "text/json_depth.h"

namespace parlance::server::fields {

void refuse(const std::string& param, const std::string& message, const std::string& code) {
    throw ApiError(400, message, param, code, "invalid_request_error");
}

std::string dump(const ordered_json& j) {
    return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

ordered_json parse_json(const std::string& text, const std::string& param, const std::string& what) {
    if (!json_within_depth(text))
        refuse(param, what + " nests deeper than " + std::to_string(kMaxJsonDepth) + " levels of arrays and objects",
               "json_too_deep");
    return ordered_json::parse(text, nullptr, false);
}

ordered_json parse_object(const std::string& body) {
    ordered_json j = parse_json(body, "", "the request body");
    if (j.is_discarded()) refuse("", "the request body is not valid JSON", "invalid_json");
    if (!j.is_object()) refuse("", "the request body must be a JSON object", "invalid_type");
    return j;
}

void only_known(const ordered_json& j, const std::set<std::string>& known, const std::string& where) {
    for (const auto& [k, v] : j.items())
        if (!known.count(k))
            refuse(where.empty() ? k : where + "." + k,
                   "unrecognized request argument supplied: " + ApiError::quote(where.empty() ? k : where + "." + k),
                   "unknown_parameter");
}

bool has(const ordered_json& j, const char* key) {
    return j.contains(key) && !j[key].is_null();
}

double number(const ordered_json& v, const std::string& param, double lo, double hi) {
    if (!v.is_number()) refuse(param, param + " must be a number", "invalid_type");
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < lo || x > hi)
        refuse(param, param + " must be between " + ordered_json(lo).dump() + " and " + ordered_json(hi).dump());
    return x;
}

int integer(const ordered_json& v, const std::string& param, int64_t lo, int64_t hi) {
    if (!v.is_number_integer()) refuse(param, param + " must be an integer", "invalid_type");
    // An unsigned value past int64's range would wrap to a negative one: refused as out of range.
    const bool huge = v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX);
    const int64_t x = huge ? INT64_MAX : v.get<int64_t>();
    if (huge || x < lo || x > hi)
        refuse(param, param + " must be between " + std::to_string(lo) + " and " + std::to_string(hi));
    return static_cast<int>(x);
}

bool boolean(const ordered_json& v, const std::string& param) {
    if (!v.is_boolean()) refuse(param, param + " must be a boolean", "invalid_type");
    return v.get<bool>();
}

std::string string(const ordered_json& v, const std::string& param) {
    if (!v.is_string()) refuse(param, param + " must be a string", "invalid_type");
    return v.get<std::string>();
}

uint64_t seed(const ordered_json& v, const std::string& param) {
    if (!v.is_number_integer()) refuse(param, param + " must be an integer", "invalid_type");
    return v.is_number_unsigned() ? v.get<uint64_t>() : static_cast<uint64_t>(v.get<int64_t>());
}

std::vector<std::string> stop_strings(const ordered_json& v, const std::string& param, size_t max) {
    std::vector<std::string> out;
    if (v.is_string()) {
        out.push_back(v.get<std::string>());
    } else if (v.is_array()) {
        if (v.size() > max) refuse(param, "at most " + std::to_string(max) + " stop strings");
        for (size_t i = 0; i < v.size(); ++i) out.push_back(string(v[i], param + "[" + std::to_string(i) + "]"));
    } else {
        refuse(param, param + " must be a string or an array of strings", "invalid_type");
    }
    for (const auto& x : out)
        if (x.empty() || x.size() > 256) refuse(param, "a stop string is 1 to 256 bytes");
    return out;
}

std::set<std::string> with_sampling(std::set<std::string> known) {
    for (const char* k : {"min_tokens", "ignore_eos", "temperature", "top_p", "top_k", "min_p", "presence_penalty",
                          "frequency_penalty", "repetition_penalty", "seed", "stop", "service_tier"})
        known.insert(k);
    return known;
}

void read_sampling(const ordered_json& j, Sampling& s, size_t max_stop) {
    if (has(j, "min_tokens")) s.min_tokens = integer(j["min_tokens"], "min_tokens", 0, 1 << 20);
    if (has(j, "ignore_eos")) s.ignore_eos = boolean(j["ignore_eos"], "ignore_eos");
    if (has(j, "temperature")) s.temperature = static_cast<float>(number(j["temperature"], "temperature", 0, 2));
    if (has(j, "top_p")) {
        s.top_p = static_cast<float>(number(j["top_p"], "top_p", 0, 1));
        if (s.top_p <= 0) refuse("top_p", "top_p must be greater than 0");
    }
    if (has(j, "top_k")) s.top_k = std::max(0, integer(j["top_k"], "top_k", -1, 1 << 20));  // vLLM: -1 = all
    if (has(j, "min_p")) s.min_p = static_cast<float>(number(j["min_p"], "min_p", 0, 1));
    if (has(j, "presence_penalty"))
        s.presence_penalty = static_cast<float>(number(j["presence_penalty"], "presence_penalty", -2, 2));
    if (has(j, "frequency_penalty"))
        s.frequency_penalty = static_cast<float>(number(j["frequency_penalty"], "frequency_penalty", -2, 2));
    if (has(j, "repetition_penalty")) {
        s.repetition_penalty = static_cast<float>(number(j["repetition_penalty"], "repetition_penalty", 0, 10));
        if (s.repetition_penalty <= 0) refuse("repetition_penalty", "repetition_penalty must be greater than 0");
    }
    if (has(j, "seed")) s.seed = seed(j["seed"], "seed");
    if (has(j, "stop")) s.stop = stop_strings(j["stop"], "stop", max_stop);
    if (has(j, "service_tier")) s.priority = service_tier(string(j["service_tier"], "service_tier"));
}

Priority service_tier(const std::string& tier) {
    if (tier == "flex") return Priority::Bulk;
    if (tier == "auto" || tier == "default" || tier == "priority") return Priority::Interactive;
    refuse("service_tier", "service_tier is auto, default, flex or priority");
}

}  // namespace parlance::server::fields
