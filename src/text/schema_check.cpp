// Structured output's schemas checked before grammar work (see schema_check.h).
#include "text/schema_check.h"

#include <cmath>
#include <optional>
#include <set>
#include <vector>

namespace parlance {

// Named, not anonymous: a unity build joins this file with others that have helpers of these names.
namespace schema_walk {

using json = nlohmann::ordered_json;

// Patterns: longer ones are refused outright (the converter's pattern parser recurses per group).
constexpr size_t kMaxPatternBytes = 4096;
constexpr int kMaxPatternGroupDepth = 32;
constexpr size_t kMaxFormatBytes = 64;
// Integer bounds the converter reads as int64.
constexpr double kInt64Edge = 9.2e18;

std::string num(int64_t x) {
    return std::to_string(x);
}

std::string pointer(const std::string& path, const std::string& key) {
    std::string out = path + "/";
    for (char c : key) {
        if (c == '~')
            out += "~0";
        else if (c == '/')
            out += "~1";
        else
            out += c;
    }
    return out;
}

class Walker {
public:
    Walker(const SchemaLimits& limits, SchemaBudget& budget) : lim_(limits), b_(budget) {}

    void walk(const json& s, const std::string& path) {
        if (s.is_boolean()) return;  // true / false schemas
        if (!s.is_object()) fail(path, "a schema is an object or a boolean");
        const bool integer = s.contains("type") && s["type"] == "integer";
        if (s.contains("type")) type(s["type"], pointer(path, "type"));
        if (s.contains("$ref")) {
            const json& r = s["$ref"];
            if (!r.is_string() || r.get<std::string>().empty() || r.get<std::string>()[0] != '#')
                fail(pointer(path, "$ref"), "only references within the schema (\"#/...\") are supported");
        }
        if (s.contains("enum")) {
            const json& e = s["enum"];
            if (!e.is_array() || e.empty()) fail(pointer(path, "enum"), "enum is a non-empty array");
            b_.enum_values += static_cast<int64_t>(e.size());
            if (b_.enum_values > lim_.max_enum_values)
                fail(pointer(path, "enum"), "the schemas have more than " + num(lim_.max_enum_values) +
                                                " enum values in all (serve --schema-max-enum-values)");
        }
        if (s.contains("properties")) {
            const json& p = s["properties"];
            if (!p.is_object()) fail(pointer(path, "properties"), "properties is an object of schemas");
            b_.properties += static_cast<int64_t>(p.size());
            if (b_.properties > lim_.max_properties)
                fail(pointer(path, "properties"), "the schemas have more than " + num(lim_.max_properties) +
                                                      " properties in all (serve --schema-max-properties)");
            for (const auto& [k, v] : p.items()) walk(v, pointer(pointer(path, "properties"), k));
        }
        std::set<std::string> required;
        if (s.contains("required")) {
            const json& r = s["required"];
            if (!r.is_array()) fail(pointer(path, "required"), "required is an array of property names");
            for (const auto& x : r) {
                if (!x.is_string()) fail(pointer(path, "required"), "required is an array of property names");
                required.insert(x.get<std::string>());
            }
        }
        if (s.contains("properties")) {
            for (const auto& [k, v] : s["properties"].items()) b_.optional_properties += required.count(k) ? 0 : 1;
            if (b_.optional_properties > lim_.max_optional_properties)
                fail(pointer(path, "properties"), "the schemas have more than " + num(lim_.max_optional_properties) +
                                                      " optional properties (not in their object's required) in all "
                                                      "(serve --schema-max-optional-properties)");
        }
        for (const char* k : {"additionalProperties", "items", "not", "contains", "propertyNames"})
            if (s.contains(k)) {
                if (std::string(k) == "items" && s[k].is_array())
                    each(s[k], pointer(path, k));  // the tuple form of older drafts
                else
                    walk(s[k], pointer(path, k));
            }
        for (const char* k : {"anyOf", "oneOf", "allOf", "prefixItems"})
            if (s.contains(k)) {
                if (!s[k].is_array() || s[k].empty())
                    fail(pointer(path, k), std::string(k) + " is a non-empty array of schemas");
                each(s[k], pointer(path, k));
            }
        for (const char* k : {"$defs", "definitions"})
            if (s.contains(k)) {
                if (!s[k].is_object()) fail(pointer(path, k), std::string(k) + " is an object of schemas");
                for (const auto& [name, v] : s[k].items()) walk(v, pointer(pointer(path, k), name));
            }
        if (s.contains("format")) {
            const json& f = s["format"];
            if (!f.is_string() || f.get<std::string>().size() > kMaxFormatBytes)
                fail(pointer(path, "format"), "format is a string of at most " + num(kMaxFormatBytes) + " bytes");
        }
        if (s.contains("pattern")) pattern(s["pattern"], pointer(path, "pattern"));
        min_max(s, "minLength", "maxLength", path);
        min_max(s, "minItems", "maxItems", path);
        min_max(s, "minProperties", "maxProperties", path);
        bounds(s, path, integer);
    }

private:
    [[noreturn]] static void fail(const std::string& path, const std::string& message) {
        throw SchemaError(path, message);
    }

    void each(const json& list, const std::string& path) {
        for (size_t i = 0; i < list.size(); ++i) walk(list[i], pointer(path, std::to_string(i)));
    }

    static void type(const json& t, const std::string& path) {
        static const std::set<std::string> kTypes = {"string", "number", "integer", "boolean",
                                                     "object", "array",  "null"};
        auto ok = [&](const json& x) { return x.is_string() && kTypes.count(x.get<std::string>()); };
        if (ok(t)) return;
        if (t.is_array() && !t.empty()) {
            bool all = true;
            for (const auto& x : t) all = all && ok(x);
            if (all) return;
        }
        fail(path, "type is one of string, number, integer, boolean, object, array, null, or a list of them");
    }

    void spend(int64_t n, const std::string& path) {
        b_.repetition += n;
        if (b_.repetition > lim_.max_repetition)
            fail(path, "the schemas ask for more than " + num(lim_.max_repetition) +
                           " repetitions in all (lengths, item and property counts, pattern counts; serve "
                           "--schema-max-repetition)");
    }

    // A count keyword: a non-negative integer no larger than the repetition limit.
    std::optional<int64_t> count(const json& s, const char* key, const std::string& path) const {
        if (!s.contains(key)) return std::nullopt;
        const json& v = s[key];
        const std::string at = pointer(path, key);
        if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0))
            fail(at, std::string(key) + " is a non-negative integer");
        if (v.get<uint64_t>() > static_cast<uint64_t>(lim_.max_repetition))
            fail(at, std::string(key) + " is larger than the limit of " + num(lim_.max_repetition) +
                         " (serve --schema-max-repetition)");
        return v.get<int64_t>();
    }

    void min_max(const json& s, const char* lo_key, const char* hi_key, const std::string& path) {
        const auto lo = count(s, lo_key, path), hi = count(s, hi_key, path);
        if (lo && hi && *lo > *hi)
            fail(pointer(path, lo_key), std::string(lo_key) + " " + num(*lo) + " is greater than " + hi_key + " " +
                                            num(*hi) + ": no value satisfies both");
        if (lo || hi) spend(hi ? *hi : *lo, pointer(path, hi ? hi_key : lo_key));
    }

    // minimum / maximum / exclusiveMinimum / exclusiveMaximum: numbers that leave some value.
    static void bounds(const json& s, const std::string& path, bool integer) {
        std::optional<double> lo, hi;
        bool lo_open = false, hi_open = false;
        for (const char* k : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
            if (!s.contains(k)) continue;
            const json& v = s[k];
            const std::string at = pointer(path, k);
            if (!v.is_number() || !std::isfinite(v.get<double>())) fail(at, std::string(k) + " is a number");
            const double x = v.get<double>();
            if (integer && (std::floor(x) != x || std::fabs(x) > kInt64Edge))
                fail(at, std::string(k) + " of an integer schema is an integer within 64 bits");
            const std::string key = k;
            const bool open = key.rfind("exclusive", 0) == 0;
            if (key.find("inimum") != std::string::npos) {
                if (!lo || x > *lo || (x == *lo && open)) lo = x, lo_open = open;
            } else {
                if (!hi || x < *hi || (x == *hi && open)) hi = x, hi_open = open;
            }
        }
        if (!lo || !hi) return;
        bool empty;
        if (integer) {
            const double first = lo_open ? *lo + 1 : *lo, last = hi_open ? *hi - 1 : *hi;
            empty = first > last;
        } else {
            empty = *lo > *hi || (*lo == *hi && (lo_open || hi_open));
        }
        if (empty)
            fail(path, std::string("no ") + (integer ? "integer" : "number") + " is " +
                           (lo_open ? "greater than " : "at least ") + json(*lo).dump() + " and " +
                           (hi_open ? "less than " : "at most ") + json(*hi).dump());
    }

    // A pattern: its {m,n} counts ordered and, multiplied through nested groups as llama-grammar
    // writes them out, within the repetition budget; groups balanced and not too deep.
    void pattern(const json& v, const std::string& path) {
        if (!v.is_string()) fail(path, "pattern is a string");
        const std::string p = v.get<std::string>();
        if (p.size() > kMaxPatternBytes) fail(path, "pattern is longer than " + num(kMaxPatternBytes) + " bytes");
        const int64_t cap = lim_.max_repetition + 1;
        std::vector<int64_t> sums{0};  // the written-out size of each open group so far
        int64_t last = 0;              // the latest atom's size, not yet added (a count may follow)
        auto finish = [&] {
            sums.back() = std::min(cap, sums.back() + last);
            last = 0;
        };
        for (size_t i = 0; i < p.size(); ++i) {
            const char c = p[i];
            if (c == '\\') {
                finish();
                last = 1;
                ++i;
            } else if (c == '[') {
                finish();
                size_t j = i + 1;
                if (j < p.size() && p[j] == '^') ++j;
                if (j < p.size() && p[j] == ']') ++j;
                while (j < p.size() && p[j] != ']') j += p[j] == '\\' ? 2 : 1;
                if (j >= p.size()) fail(path, "pattern has an unterminated character class");
                i = j;
                last = 1;
            } else if (c == '(') {
                finish();
                sums.push_back(0);
                if (static_cast<int>(sums.size()) > kMaxPatternGroupDepth + 1)
                    fail(path, "pattern nests groups deeper than " + num(kMaxPatternGroupDepth));
            } else if (c == ')') {
                finish();
                if (sums.size() == 1) fail(path, "pattern has an unbalanced ')'");
                last = std::max<int64_t>(1, sums.back());
                sums.pop_back();
            } else if (c == '{') {
                size_t j = i + 1;
                auto digits = [&](int64_t& out) {
                    const size_t from = j;
                    out = 0;
                    while (j < p.size() && p[j] >= '0' && p[j] <= '9' && j - from < 10) out = out * 10 + (p[j++] - '0');
                    return j > from;
                };
                int64_t m = 0, n = -1;
                if (!digits(m)) fail(path, "pattern has a '{' that is not a count {m}, {m,} or {m,n}");
                if (j < p.size() && p[j] == ',') {
                    ++j;
                    int64_t x = 0;
                    if (digits(x)) n = x;
                } else {
                    n = m;
                }
                if (j >= p.size() || p[j] != '}')
                    fail(path, "pattern has a '{' that is not a count {m}, {m,} or {m,n}");
                if (n >= 0 && m > n)
                    fail(path, "pattern's count {" + num(m) + "," + num(n) + "} has its minimum above its maximum");
                const int64_t k = std::max<int64_t>(1, n >= 0 ? n : m);
                if (k > lim_.max_repetition || last > cap / k) {
                    spend(cap, path);
                }
                last = last * k;
                i = j;
            } else if (c == '*' || c == '+' || c == '?') {
                // the atom is written once, looped
            } else {
                finish();
                last = 1;
            }
        }
        finish();
        if (sums.size() != 1) fail(path, "pattern has an unclosed '('");
        spend(sums[0], path);
    }

    const SchemaLimits& lim_;
    SchemaBudget& b_;
};

}  // namespace schema_walk

void check_schema(const nlohmann::ordered_json& schema, const SchemaLimits& limits, SchemaBudget& budget) {
    schema_walk::Walker(limits, budget).walk(schema, "#");
}

}  // namespace parlance
