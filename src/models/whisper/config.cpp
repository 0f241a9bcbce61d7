// Whisper configuration parsing and validation (see config.h).
#include "models/whisper/config.h"

#include <algorithm>

#include "core/error.h"

namespace parlance::whisper {
namespace {

int require_int(const nlohmann::json& j, const char* key, const std::string& source, int min_value,
                int max_value) {
    if (!j.contains(key))
        throw Error(ErrorKind::InvalidModel, source + ": missing field '" + key + "'");
    const auto& v = j.at(key);
    if (!v.is_number_integer())
        throw Error(ErrorKind::InvalidModel, source + ": field '" + key + "' must be an integer");
    long long x = v.get<long long>();
    if (x < min_value || x > max_value)
        throw Error(ErrorKind::InvalidModel, source + ": field '" + key + "' = " +
                                                 std::to_string(x) + " is out of range [" +
                                                 std::to_string(min_value) + ", " +
                                                 std::to_string(max_value) + "]");
    return static_cast<int>(x);
}

int optional_int(const nlohmann::json& j, const char* key, int fallback, const std::string& source,
                 int min_value, int max_value) {
    if (!j.contains(key) || j.at(key).is_null()) return fallback;
    return require_int(j, key, source, min_value, max_value);
}

void validate(const WhisperConfig& c, const std::string& source) {
    auto fail = [&](const std::string& what) {
        throw Error(ErrorKind::InvalidModel, source + ": " + what);
    };
    if (c.n_mels != 80 && c.n_mels != 128)
        fail("num_mel_bins = " + std::to_string(c.n_mels) + " (Whisper uses 80 or 128)");
    if (c.d_model % c.encoder_heads != 0)
        fail("d_model " + std::to_string(c.d_model) + " is not divisible by encoder_attention_heads " +
             std::to_string(c.encoder_heads));
    if (c.d_model % c.decoder_heads != 0)
        fail("d_model " + std::to_string(c.d_model) + " is not divisible by decoder_attention_heads " +
             std::to_string(c.decoder_heads));
    // Any vocabulary holds at least the special tokens and the 1501 timestamps; a compact one
    // (smaller than OpenAI's 51864) names its special tokens in generation_config.json.
    if (c.vocab_size < kCompactVocabMinimum)
        fail("vocab_size = " + std::to_string(c.vocab_size) +
             " cannot hold Whisper's special and timestamp tokens (" +
             std::to_string(kCompactVocabMinimum) + " at least)");
}

}  // namespace

WhisperConfig WhisperConfig::from_hf(const nlohmann::json& j, const std::string& source) {
    if (j.contains("model_type") && j.at("model_type") != "whisper")
        throw Error(ErrorKind::InvalidModel, source + ": model_type is " + j.at("model_type").dump() +
                                                 ", expected \"whisper\"");
    WhisperConfig c;
    c.n_mels = require_int(j, "num_mel_bins", source, 1, 1024);
    c.d_model = require_int(j, "d_model", source, 1, 16384);
    c.encoder_layers = require_int(j, "encoder_layers", source, 1, 256);
    c.encoder_heads = require_int(j, "encoder_attention_heads", source, 1, 256);
    c.encoder_ffn = require_int(j, "encoder_ffn_dim", source, 1, 65536);
    c.decoder_layers = require_int(j, "decoder_layers", source, 1, 256);
    c.decoder_heads = require_int(j, "decoder_attention_heads", source, 1, 256);
    c.decoder_ffn = require_int(j, "decoder_ffn_dim", source, 1, 65536);
    c.vocab_size = require_int(j, "vocab_size", source, 1, 1 << 20);
    c.max_source_positions = optional_int(j, "max_source_positions", 1500, source, 1, 1 << 16);
    c.max_target_positions = optional_int(j, "max_target_positions", 448, source, 1, 1 << 16);
    if (j.contains("activation_function") && j.at("activation_function") != "gelu")
        throw Error(ErrorKind::Unsupported, source + ": activation_function " +
                                                j.at("activation_function").dump() +
                                                " (only \"gelu\" is implemented)");
    validate(c, source);
    return c;
}

WhisperConfig WhisperConfig::from_whispercpp(const nlohmann::json& h, const std::string& source) {
    WhisperConfig c;
    c.vocab_size = require_int(h, "n_vocab", source, 1, 1 << 20);
    c.max_source_positions = require_int(h, "n_audio_ctx", source, 1, 1 << 16);
    c.d_model = require_int(h, "n_audio_state", source, 1, 16384);
    c.encoder_heads = require_int(h, "n_audio_head", source, 1, 256);
    c.encoder_layers = require_int(h, "n_audio_layer", source, 1, 256);
    c.max_target_positions = require_int(h, "n_text_ctx", source, 1, 1 << 16);
    int text_state = require_int(h, "n_text_state", source, 1, 16384);
    if (text_state != c.d_model)
        throw Error(ErrorKind::InvalidModel, source + ": n_text_state " + std::to_string(text_state) +
                                                 " differs from n_audio_state " +
                                                 std::to_string(c.d_model));
    if (c.vocab_size < kOpenAiVocabEn)
        throw Error(ErrorKind::InvalidModel,
                    source + ": n_vocab = " + std::to_string(c.vocab_size) +
                        " is smaller than Whisper's token layout (51864), which whisper.cpp files imply");
    c.decoder_heads = require_int(h, "n_text_head", source, 1, 256);
    c.decoder_layers = require_int(h, "n_text_layer", source, 1, 256);
    c.n_mels = require_int(h, "n_mels", source, 1, 1024);
    c.encoder_ffn = c.decoder_ffn = 4 * c.d_model;  // whisper.cpp files imply 4x; checked on bind
    validate(c, source);
    return c;
}

const std::vector<std::string>& whisper_language_codes() {
    static const std::vector<std::string> codes = {
        "en", "zh", "de", "es", "ru", "ko", "fr", "ja", "pt", "tr", "pl", "ca", "nl", "ar", "sv",
        "it", "id", "hi", "fi", "vi", "he", "uk", "el", "ms", "cs", "ro", "da", "hu", "ta", "no",
        "th", "ur", "hr", "bg", "lt", "la", "mi", "ml", "cy", "sk", "te", "fa", "lv", "bn", "sr",
        "az", "sl", "kn", "et", "mk", "br", "eu", "is", "hy", "ne", "mn", "bs", "kk", "sq", "sw",
        "gl", "mr", "pa", "si", "km", "sn", "yo", "so", "af", "oc", "ka", "be", "tg", "sd", "gu",
        "am", "yi", "lo", "uz", "fo", "ht", "ps", "tk", "nn", "mt", "sa", "lb", "my", "bo", "tl",
        "mg", "as", "tt", "haw", "ln", "ha", "ba", "jw", "su", "yue"};
    return codes;
}

std::string SpecialTokens::language_of(int id) const {
    for (const auto& [code, token] : languages)
        if (token == id) return code;
    return "";
}

int SpecialTokens::language_token(const std::string& code) const {
    auto it = languages.find(code);
    if (it == languages.end())
        throw Error(ErrorKind::InvalidArgument, "unknown language '" + code.substr(0, 100) + "' for this model");
    return it->second;
}

SpecialTokens special_tokens_from_layout(int vocab_size) {
    SpecialTokens t;
    if (vocab_size < kOpenAiVocabEn) return t;  // compact: generation_config.json names every id
    t.multilingual = vocab_size >= 51865;
    int n_languages = vocab_size - 51765 - (t.multilingual ? 1 : 0);
    t.eot = t.multilingual ? 50257 : 50256;
    t.sot = t.eot + 1;
    const auto& codes = whisper_language_codes();
    for (int i = 0; i < n_languages && i < static_cast<int>(codes.size()); ++i)
        t.languages[codes[i]] = t.sot + 1 + i;
    t.translate = t.sot + 1 + n_languages;
    t.transcribe = t.translate + 1;
    t.startoflm = t.transcribe + 1;
    t.startofprev = t.startoflm + 1;
    t.nospeech = t.startofprev + 1;
    t.notimestamps = t.nospeech + 1;
    t.timestamp_begin = t.notimestamps + 1;
    t.begin_suppress_tokens = {220, t.eot};
    return t;
}

SpecialTokens special_tokens_from_hf(const nlohmann::json& g, int vocab_size,
                                     const std::string& source) {
    SpecialTokens t = special_tokens_from_layout(vocab_size);
    auto get = [&](const char* key, int& out) {
        if (g.contains(key) && g.at(key).is_number_integer()) out = g.at(key).get<int>();
    };
    get("eos_token_id", t.eot);
    get("decoder_start_token_id", t.sot);
    get("no_timestamps_token_id", t.notimestamps);
    get("prev_sot_token_id", t.startofprev);
    if (g.contains("no_timestamps_token_id")) t.timestamp_begin = t.notimestamps + 1;
    if (g.contains("is_multilingual") && g.at("is_multilingual").is_boolean())
        t.multilingual = g.at("is_multilingual").get<bool>();
    if (g.contains("lang_to_id") && g.at("lang_to_id").is_object()) {
        t.languages.clear();
        for (const auto& [key, value] : g.at("lang_to_id").items()) {
            std::string code = key;
            if (code.size() > 4 && code.rfind("<|", 0) == 0) code = code.substr(2, code.size() - 4);
            t.languages[code] = value.get<int>();
        }
    }
    if (g.contains("task_to_id") && g.at("task_to_id").is_object()) {
        const auto& tasks = g.at("task_to_id");
        if (tasks.contains("translate")) t.translate = tasks.at("translate").get<int>();
        if (tasks.contains("transcribe")) t.transcribe = tasks.at("transcribe").get<int>();
    }
    if (g.contains("suppress_tokens") && g.at("suppress_tokens").is_array())
        t.suppress_tokens = g.at("suppress_tokens").get<std::vector<int>>();
    if (g.contains("begin_suppress_tokens") && g.at("begin_suppress_tokens").is_array())
        t.begin_suppress_tokens = g.at("begin_suppress_tokens").get<std::vector<int>>();
    get("max_initial_timestamp_index", t.max_initial_timestamp_index);
    if (g.contains("condition_on_prev_tokens") && !g.at("condition_on_prev_tokens").is_null()) {
        if (!g.at("condition_on_prev_tokens").is_boolean())
            throw Error(ErrorKind::InvalidModel, source + ": condition_on_prev_tokens must be true or false");
        t.condition_on_previous_text = g.at("condition_on_prev_tokens").get<bool>();
    }
    if (g.contains("num_beams") && !g.at("num_beams").is_null()) {
        const auto& n = g.at("num_beams");
        if (!n.is_number_integer() || n.get<int64_t>() < 1 || n.get<int64_t>() > kMaxBeams)
            throw Error(ErrorKind::InvalidModel,
                        source + ": num_beams must be an integer from 1 to " +
                            std::to_string(kMaxBeams) + ", not " + n.dump());
        t.num_beams = n.get<int>();
    }
    if (g.contains("alignment_heads") && g.at("alignment_heads").is_array()) {
        for (const auto& pair : g.at("alignment_heads")) {
            if (!pair.is_array() || pair.size() != 2)
                throw Error(ErrorKind::InvalidModel,
                            source + ": alignment_heads entries must be [layer, head] pairs");
            t.alignment_heads.emplace_back(pair[0].get<int>(), pair[1].get<int>());
        }
    }
    auto check = [&](const char* name, int id) {
        if (id < 0 || id >= vocab_size)
            throw Error(ErrorKind::InvalidModel, source + ": " + name + " = " + std::to_string(id) +
                                                     " is outside the vocabulary (" +
                                                     std::to_string(vocab_size) + " tokens)");
    };
    check("eos_token_id", t.eot);
    check("decoder_start_token_id", t.sot);
    check("no_timestamps_token_id", t.notimestamps);
    check("timestamp_begin", t.timestamp_begin);
    for (const auto& [code, id] : t.languages) check(("lang_to_id." + code).c_str(), id);
    for (int id : t.suppress_tokens) check("suppress_tokens[]", id);
    return t;
}

void name_special_tokens(SpecialTokens& t, const std::function<std::optional<int>(const std::string&)>& id_of,
                         const std::string& source) {
    auto by_name = [&](std::initializer_list<const char*> names, int& id) {
        for (const char* name : names)
            if (auto found = id_of(name)) {
                id = *found;
                return;
            }
    };
    by_name({"<|startoflm|>"}, t.startoflm);
    by_name({"<|startofprev|>"}, t.startofprev);
    by_name({"<|nospeech|>", "<|nocaptions|>"}, t.nospeech);
    if (t.translate < 0) by_name({"<|translate|>"}, t.translate);
    if (t.transcribe < 0) by_name({"<|transcribe|>"}, t.transcribe);
    if (t.transcribe < 0)
        throw Error(ErrorKind::InvalidModel,
                    source + ": no task_to_id.transcribe, and the tokenizer has no <|transcribe|>");
}

}  // namespace parlance::whisper
