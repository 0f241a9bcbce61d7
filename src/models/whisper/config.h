// Whisper hyper-parameters, read from an HF config.json or a whisper.cpp header and validated
// against the weights, and the special-token layout derived from generation_config/tokenizer.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace parlance::whisper {

struct WhisperConfig {
    int n_mels = 80;
    int d_model = 0;
    int encoder_layers = 0;
    int encoder_heads = 0;
    int encoder_ffn = 0;
    int decoder_layers = 0;
    int decoder_heads = 0;
    int decoder_ffn = 0;
    int vocab_size = 0;
    int max_source_positions = 1500;  // encoder frames after the stride-2 conv (30 s)
    int max_target_positions = 448;   // decoder context
    float layer_norm_eps = 1e-5f;

    // From HF config.json (model_type "whisper"). Throws Error(InvalidModel) naming the field
    // that is missing, of the wrong type or out of range; `source` names the file.
    static WhisperConfig from_hf(const nlohmann::json& config, const std::string& source);
    // From whisper.cpp's hparams (n_vocab, n_audio_state, ...).
    static WhisperConfig from_whispercpp(const nlohmann::json& hparams, const std::string& source);

    int encoder_head_dim() const { return d_model / encoder_heads; }
    int decoder_head_dim() const { return d_model / decoder_heads; }
    int n_audio_samples() const { return max_source_positions * 2 * 160; }  // 480000 for 30 s
    int n_mel_frames() const { return max_source_positions * 2; }            // 3000
};

// OpenAI's vocabularies: 51864 (.en), 51865 (multilingual), 51866 (large-v3). A model trained
// with its own, smaller vocabulary keeps Whisper's special-token structure, but its ids come from
// generation_config.json and tokenizer.json, not from this layout.
inline constexpr int kOpenAiVocabEn = 51864;
inline constexpr int kOpenAiVocabMultilingual = 51865;
inline constexpr int kCompactVocabMinimum = 1501 + 4;  // timestamps + eot, sot, task, notimestamps

// The most beams a model's generation_config may ask for by default (each takes two decoder
// cache slots per request).
inline constexpr int kMaxBeams = 16;

// Token ids with a meaning in Whisper's prompt and output.
struct SpecialTokens {
    int eot = -1;            // <|endoftext|>
    int sot = -1;            // <|startoftranscript|>
    int translate = -1;      // <|translate|>
    int transcribe = -1;     // <|transcribe|>
    int startoflm = -1;      // <|startoflm|>
    int startofprev = -1;    // <|startofprev|>
    int nospeech = -1;       // <|nospeech|> (called <|nocaptions|> in older files)
    int notimestamps = -1;   // <|notimestamps|>
    int timestamp_begin = -1;  // <|0.00|>; timestamps run to the end of the vocabulary
    bool multilingual = false;
    std::map<std::string, int> languages;  // "en" -> id of <|en|>, in id order
    std::vector<int> suppress_tokens;        // always suppressed (generation_config)
    std::vector<int> begin_suppress_tokens;  // suppressed at the first sampled position
    int max_initial_timestamp_index = 50;    // first timestamp at most <|1.00|>
    std::vector<std::pair<int, int>> alignment_heads;  // (decoder layer, head) for word timing
    // Whether a window is prompted with the previous windows' text: generation_config's
    // condition_on_prev_tokens when it has one (a model trained without such prompts says
    // false), else true as OpenAI's transcribe does. TranscribeOptions can override it.
    bool condition_on_previous_text = true;
    // Beams when a request does not say (1 = greedy): generation_config's num_beams, as
    // transformers' generate() reads it. A model may decode best with beam search (ours does on
    // long audio); TranscribeOptions::beam_size overrides it.
    int num_beams = 1;

    // The language code of a language token, or "" if `id` is not one.
    std::string language_of(int id) const;
    // Id of <|code|>; throws Error(InvalidArgument) naming the code when unknown.
    int language_token(const std::string& code) const;
    bool is_timestamp(int id) const { return id >= timestamp_begin; }
};

// From HF generation_config.json (lang_to_id, task_to_id, no_timestamps_token_id, ...). Missing
// fields are derived from the vocabulary layout. Throws Error(InvalidModel) when the file
// contradicts the vocabulary size.
SpecialTokens special_tokens_from_hf(const nlohmann::json& generation_config, int vocab_size,
                                     const std::string& source);
// Fills what generation_config.json does not list from the tokenizer's names (startoflm,
// startofprev, nospeech or nocaptions, and the tasks when task_to_id is absent): a compact
// vocabulary has no layout to derive them from; OpenAI's layouts agree with the names. `id_of`
// returns a token's id by its text, or nothing. Throws Error(InvalidModel) naming `source` when
// no transcribe token can be found.
void name_special_tokens(SpecialTokens& tokens, const std::function<std::optional<int>(const std::string&)>& id_of,
                         const std::string& source);
// From the vocabulary size alone, with the layout whisper.cpp files imply (51864 .en,
// 51865 multilingual, 51866 with v3's extra language).
SpecialTokens special_tokens_from_layout(int vocab_size);

// Whisper's language codes in token order (the 99 of the original release, then "yue").
const std::vector<std::string>& whisper_language_codes();

}  // namespace parlance::whisper
