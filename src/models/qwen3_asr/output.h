// What Qwen3-ASR's text means: the languages it was trained with (the forced-language prompt takes
// their English names) and its "language X<asr_text>transcription" output.
#pragma once

#include <optional>
#include <span>
#include <string>

namespace parlance::qwen3_asr {

struct Language {
    const char* code;  // ISO 639 ("en", "yue", "fil")
    const char* name;  // as the prompt writes it ("English")
};
// The 30 languages, in transformers' LANGUAGE_CODE_TO_NAME order.
std::span<const Language> languages();
// A code or a name, any case ("en", "English", "english") -> the language; nullopt if unknown.
std::optional<Language> find_language(const std::string& code_or_name);
// "Arabic (ar), Cantonese (yue), ...": for errors.
std::string language_list();

struct ParsedOutput {
    std::string language;       // the name the model wrote ("English"); "" if none or "None"
    std::string transcription;  // the text after <asr_text>, trimmed
    bool no_speech = false;     // "language None": the model heard no speech
};
// transformers' Qwen3ASRProcessor.parse_output on one decoded string (special tokens skipped,
// <asr_text> kept): everything after "assistant\n" if present; without <asr_text> the whole text
// is the transcription.
ParsedOutput parse_output(const std::string& text);

// The toolkit's guard against decode loops (qwen_asr's detect_and_fix_repetitions, applied to the
// whole decoded string before it is parsed), on code points: first every run of more than
// `threshold` equal characters becomes one character; then, scanning from the start, the first
// unit of 1 to 20 characters that occurs `threshold` or more times back to back is kept once, and
// the text after the last copy is treated the same way. Text without such loops is unchanged.
std::string fix_repetitions(const std::string& text, int threshold = 20);
// The toolkit's parse_asr_output order: the decoded text trimmed, its loops collapsed
// (fix_repetitions), then parsed (parse_output). The trim matters: the unit pass depends on how
// far a loop ends from the end of the text.
ParsedOutput parse_output_fixing_loops(const std::string& text);

}  // namespace parlance::qwen3_asr
