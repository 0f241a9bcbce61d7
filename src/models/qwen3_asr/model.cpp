// A loaded Qwen3-ASR checkpoint (see model.h).
#include "models/qwen3_asr/model.h"

#include "core/error.h"
#include "core/model_files.h"
#include "core/weight_set.h"

namespace parlance::qwen3_asr {

std::unique_ptr<Qwen3AsrModel> Qwen3AsrModel::load(const std::filesystem::path& dir, Backend& backend,
                                                   const std::string& quantize) {
    ModelFiles files = open_model_files(dir);
    const std::filesystem::path config_file = files.root / "config.json";
    std::unique_ptr<Qwen3AsrModel> m(new Qwen3AsrModel());
    m->config_ = Qwen3AsrConfig::parse(files.config, config_file);
    m->mel_ = std::make_unique<LogMel>(m->config_.audio.num_mel_bins);
    // The encoder binds its tensors first; the decoder then takes the files (and the rest).
    m->encoder_ =
        std::make_unique<AudioEncoder>(m->config_.audio, *files.tensors, backend, parse_weight_type(quantize));
    qwen3::Qwen3LoadOptions lo;
    lo.quantize = quantize;
    lo.config = &m->config_.text_config;
    lo.hf_prefix = "model.language_model.";
    for (const TensorInfo& t : files.tensors->tensors())
        if (t.name.rfind(lo.hf_prefix, 0) != 0 && t.name != "lm_head.weight") lo.foreign_tensors.push_back(t.name);
    m->decoder_ = qwen3::Qwen3Model::load(std::move(files), backend, lo);

    const Tokenizer& tok = m->decoder_->tokenizer();
    auto need = [&](const char* text) {
        const auto id = tok.token_to_id(text);
        if (!id) throw Error(ErrorKind::InvalidModel, (dir / "tokenizer.json").string() + ": no token " + text);
        return *id;
    };
    SpecialIds& s = m->special_;
    s.im_start = need("<|im_start|>");
    s.im_end = need("<|im_end|>");
    s.audio_start = need("<|audio_start|>");
    s.audio_end = need("<|audio_end|>");
    s.audio_pad = need("<|audio_pad|>");
    s.asr_text = need("<asr_text>");
    if (s.audio_pad != m->config_.audio_token_id)
        throw Error(ErrorKind::InvalidModel,
                    config_file.string() + ": audio_token_id " + std::to_string(m->config_.audio_token_id) +
                        " is not the tokenizer's <|audio_pad|> (" + std::to_string(s.audio_pad) + ")");
    return m;
}

Features Qwen3AsrModel::features(std::span<const float> pcm16k, int threads) const {
    return compute_features(*mel_, pcm16k, config_.audio.chunk_frames(), threads);
}

std::vector<int32_t> Qwen3AsrModel::prompt(int n_audio, const std::string& context, const std::string& language,
                                           int* audio_position) const {
    const Tokenizer& tok = decoder_->tokenizer();
    const SpecialIds& s = special_;
    std::vector<int32_t> ids;
    auto text = [&](const std::string& t) {
        const std::vector<int32_t> e = tok.encode(t);
        ids.insert(ids.end(), e.begin(), e.end());
    };
    ids.push_back(s.im_start);
    text("system\n" + context);
    ids.push_back(s.im_end);
    text("\n");
    ids.push_back(s.im_start);
    text("user\n");
    ids.push_back(s.audio_start);
    if (audio_position) *audio_position = static_cast<int>(ids.size());
    ids.insert(ids.end(), static_cast<size_t>(n_audio), s.audio_pad);
    ids.push_back(s.audio_end);
    ids.push_back(s.im_end);
    text("\n");
    ids.push_back(s.im_start);
    text("assistant\n");
    if (!language.empty()) {
        text("language " + language);
        ids.push_back(s.asr_text);
    }
    return ids;
}

}  // namespace parlance::qwen3_asr
