// Qwen3-ASR's languages and output (see output.h).
#include "models/qwen3_asr/output.h"

#include <algorithm>
#include <array>
#include <cctype>

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

}  // namespace

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
