// Qwen3-ASR's languages and output (see output.h).
#include "models/qwen3_asr/output.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>

#include "text/utf8.h"

namespace parlance::qwen3_asr {
namespace {

constexpr std::array<Language, 30> kLanguages = {{
    {"ar", "Arabic"},  {"yue", "Cantonese"}, {"zh", "Chinese"},    {"cs", "Czech"},      {"da", "Danish"},
    {"nl", "Dutch"},   {"en", "English"},    {"fil", "Filipino"},  {"fi", "Finnish"},    {"fr", "French"},
    {"de", "German"},  {"el", "Greek"},      {"hi", "Hindi"},      {"hu", "Hungarian"},  {"id", "Indonesian"},
    {"it", "Italian"}, {"ja", "Japanese"},   {"ko", "Korean"},     {"mk", "Macedonian"}, {"ms", "Malay"},
    {"fa", "Persian"}, {"pl", "Polish"},     {"pt", "Portuguese"}, {"ro", "Romanian"},   {"ru", "Russian"},
    {"es", "Spanish"}, {"sv", "Swedish"},    {"th", "Thai"},       {"tr", "Turkish"},    {"vi", "Vietnamese"},
}};

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

std::string trim(const std::string& s) {
    const size_t b = s.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return "";
    const size_t e = s.find_last_not_of(" \t\r\n");
    return s.substr(b, e - b + 1);
}

std::u32string to_code_points(const std::string& text) {
    std::u32string out;
    out.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
        const utf8::Scan s = utf8::scan(text, pos);
        out.push_back(s.status == utf8::Scan::Status::Valid ? s.code_point : U'\uFFFD');
        pos += s.length;
    }
    return out;
}

std::string to_utf8(std::u32string_view cps) {
    std::string out;
    out.reserve(cps.size());
    for (char32_t c : cps) utf8::append(out, c);
    return out;
}

// A run of more than `threshold` equal characters -> that character once.
std::u32string collapse_character_runs(std::u32string_view s, size_t threshold) {
    std::u32string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        size_t run = 1;
        while (i + run < s.size() && s[i + run] == s[i]) ++run;
        out.append(run > threshold ? s.substr(i, 1) : s.substr(i, run));
        i += run;
    }
    return out;
}

// From the start of `s`, the first position where some unit of 1..kMaxUnit characters repeats
// `threshold` times back to back: the text before it, the unit once, and the same rule on what
// follows the unit's last copy. A piece shorter than two threshold's worth is left as it is.
std::u32string collapse_unit_loops(std::u32string_view s, size_t threshold) {
    constexpr size_t kMaxUnit = 20;
    std::u32string out;
    out.reserve(s.size());
    size_t base = 0;  // start of the piece still to scan
    for (;;) {
        const size_t end = s.size();
        if (end - base < 2 * threshold) break;
        size_t resume = std::u32string_view::npos;
        size_t i = base;
        for (; i + 2 * threshold <= end; ++i) {
            for (size_t k = 1; k <= kMaxUnit && i + k * threshold <= end; ++k) {
                const std::u32string_view unit = s.substr(i, k);
                size_t copies = 1;
                while (copies < threshold && s.substr(i + copies * k, k) == unit) ++copies;
                if (copies < threshold) continue;
                size_t after = i + threshold * k;
                while (after + k <= end && s.substr(after, k) == unit) after += k;
                out.append(unit);
                resume = after;
                break;
            }
            if (resume != std::u32string_view::npos) break;
            out.push_back(s[i]);
        }
        if (resume == std::u32string_view::npos) {
            base = i;
            break;
        }
        base = resume;
    }
    out.append(s.substr(base));
    return out;
}

}  // namespace

std::string fix_repetitions(const std::string& text, int threshold) {
    if (threshold < 1) return text;
    const size_t t = static_cast<size_t>(threshold);
    return to_utf8(collapse_unit_loops(collapse_character_runs(to_code_points(text), t), t));
}

ParsedOutput parse_output_fixing_loops(const std::string& text) {
    return parse_output(fix_repetitions(trim(text)));
}

std::span<const Language> languages() {
    return kLanguages;
}

std::optional<Language> find_language(const std::string& code_or_name) {
    const std::string k = lower(trim(code_or_name));
    for (const Language& l : kLanguages)
        if (k == l.code || k == lower(l.name)) return l;
    return std::nullopt;
}

std::string language_list() {
    std::string out;
    for (const Language& l : kLanguages) out += (out.empty() ? "" : ", ") + std::string(l.name) + " (" + l.code + ")";
    return out;
}

ParsedOutput parse_output(const std::string& raw) {
    ParsedOutput out;
    std::string text = trim(raw);
    if (text.empty()) return out;
    if (const size_t a = text.find("assistant\n"); a != std::string::npos) text = text.substr(a + 10);
    const std::string marker = "<asr_text>";
    const size_t m = text.find(marker);
    if (m == std::string::npos) {
        out.transcription = trim(text);
        return out;
    }
    const std::string prefix = trim(text.substr(0, m));
    out.transcription = trim(text.substr(m + marker.size()));
    if (lower(prefix) == "language none") {
        out.no_speech = true;
        return out;
    }
    // The first non-empty line: "language X" or just X.
    size_t start = 0;
    while (start <= prefix.size()) {
        const size_t end = prefix.find('\n', start);
        const std::string line = trim(prefix.substr(start, end == std::string::npos ? std::string::npos : end - start));
        if (!line.empty()) {
            out.language = lower(line).rfind("language ", 0) == 0 ? trim(line.substr(9)) : line;
            break;
        }
        if (end == std::string::npos) break;
        start = end + 1;
    }
    return out;
}

}  // namespace parlance::qwen3_asr
