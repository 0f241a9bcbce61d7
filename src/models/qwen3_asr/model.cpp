// A loaded Qwen3-ASR checkpoint (see model.h).
#include "models/qwen3_asr/model.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "core/error.h"
#include "core/model_files.h"
#include "core/weight_set.h"
#include "models/qwen3_asr/output.h"

namespace parlance::qwen3_asr {

std::unique_ptr<Qwen3AsrModel> Qwen3AsrModel::load(const std::filesystem::path& dir, Backend& backend,
                                                   const std::string& quantize, EncoderStream encoder_stream) {
    return load(open_model_files(dir), backend, quantize, encoder_stream);
}

std::unique_ptr<Qwen3AsrModel> Qwen3AsrModel::load(ModelFiles files, Backend& backend, const std::string& quantize,
                                                   EncoderStream encoder_stream) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::filesystem::path dir = files.root;
    const bool gguf = files.tensors->format() == FileFormat::Gguf;
    if (gguf && !files.mmproj)
        throw Error(ErrorKind::InvalidModel, dir.string() + ": a Qwen3-ASR text GGUF needs its mmproj GGUF (--mmproj)");
    std::unique_ptr<Qwen3AsrModel> m(new Qwen3AsrModel());
    // Where the config and the tokenizer come from, for refusals.
    const std::string config_source =
        gguf ? files.mmproj->files().front().string() : (files.root / "config.json").string();
    const std::string tokenizer_source =
        gguf ? files.tensors->files().front().string() : (dir / "tokenizer.json").string();
    m->config_ = gguf ? Qwen3AsrConfig::from_gguf(*files.mmproj) : Qwen3AsrConfig::parse(files.config, config_source);
    m->form_ = gguf ? "GGUF pair (text + mmproj)" : "HF snapshot";
    m->mel_ = std::make_unique<LogMel>(m->config_.audio.num_mel_bins);
    if (encoder_stream != EncoderStream::Shared)
        m->encoder_backend_ = backend.companion(/*any_device=*/encoder_stream == EncoderStream::Own);
    // The encoder binds its tensors first; the decoder then takes the files (and the rest).
    m->encoder_ = std::make_unique<AudioEncoder>(m->config_.audio, gguf ? *files.mmproj : *files.tensors,
                                                 m->encoder_backend_ ? *m->encoder_backend_ : backend,
                                                 parse_weight_type(quantize));
    qwen3::Qwen3LoadOptions lo;
    lo.quantize = quantize;
    if (gguf) {
        // The toolkit's checkpoints stop on either end token; the GGUF names only <|im_end|>.
        lo.stop_tokens = {"<|im_end|>", "<|endoftext|>"};
    } else {
        lo.config = &m->config_.text_config;
        lo.hf_prefix = "model.language_model.";
        for (const TensorInfo& t : files.tensors->tensors())
            if (t.name.rfind(lo.hf_prefix, 0) != 0 && t.name != "lm_head.weight") lo.foreign_tensors.push_back(t.name);
    }
    m->decoder_ = qwen3::Qwen3Model::load(std::move(files), backend, lo);
    if (m->decoder_->hidden_size() != m->config_.audio.output_dim)
        throw Error(ErrorKind::InvalidModel,
                    config_source + ": the projector's output (" + std::to_string(m->config_.audio.output_dim) +
                        ") is not the text model's hidden size (" + std::to_string(m->decoder_->hidden_size()) + ")");

    const Tokenizer& tok = m->decoder_->tokenizer();
    auto need = [&](const char* text) {
        const auto id = tok.token_to_id(text);
        if (!id) throw Error(ErrorKind::InvalidModel, tokenizer_source + ": no token " + text);
        return *id;
    };
    SpecialIds& s = m->special_;
    s.im_start = need("<|im_start|>");
    s.im_end = need("<|im_end|>");
    s.audio_start = need("<|audio_start|>");
    s.audio_end = need("<|audio_end|>");
    s.audio_pad = need("<|audio_pad|>");
    s.asr_text = need("<asr_text>");
    if (gguf) m->config_.audio_token_id = s.audio_pad;
    if (s.audio_pad != m->config_.audio_token_id)
        throw Error(ErrorKind::InvalidModel,
                    config_source + ": audio_token_id " + std::to_string(m->config_.audio_token_id) +
                        " is not the tokenizer's <|audio_pad|> (" + std::to_string(s.audio_pad) + ")");
    m->load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return m;
}

Features Qwen3AsrModel::features(std::span<const float> pcm16k, int threads) const {
    return compute_features(*mel_, pcm16k, config_.audio.chunk_frames(), threads);
}

std::vector<int32_t> Qwen3AsrModel::prompt_for(int n_audio, const std::string& context, const std::string& language,
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

std::string Qwen3AsrModel::description() const {
    const AudioEncoderConfig& a = config_.audio;
    const qwen3::Qwen3Config& t = decoder_->config();
    return "qwen3_asr (" + form_ + "): audio encoder " + std::to_string(a.layers) + " layers, d_model " +
           std::to_string(a.d_model) + "; qwen3 decoder " + std::to_string(t.num_layers) + " layers, hidden " +
           std::to_string(t.hidden_size) + "; " + std::to_string(languages().size()) + " languages";
}

namespace {
// One clip's log-mel, as audio_features hands it to embed_features.
struct ClipFeatures final : AudioLanguageModel::AudioFeatures {
    Features f;
};
}  // namespace

std::unique_ptr<AudioLanguageModel::AudioFeatures> Qwen3AsrModel::audio_features(std::span<const float> pcm16k,
                                                                                 int threads) const {
    auto x = std::make_unique<ClipFeatures>();
    x->f = features(pcm16k, threads);
    return x;
}

std::vector<float> Qwen3AsrModel::embed_audio(std::span<const float> pcm16k, int* n_tokens, EmbedTimes* times) {
    // One clip's frames split between the cores (the same bits on any number of threads): a few
    // ms instead of ~20 for 11 s on one core.
    const auto t0 = std::chrono::steady_clock::now();
    const auto f = audio_features(pcm16k, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
    if (times) times->features += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const AudioFeatures* one[] = {f.get()};
    AudioEmbedding e = std::move(embed_features(one, 1, times).front());
    if (n_tokens) *n_tokens = e.tokens;
    return std::move(e.rows);
}

std::vector<AudioLanguageModel::AudioEmbedding> Qwen3AsrModel::embed_features(
    std::span<const AudioFeatures* const> clips, int max_per_pass, EmbedTimes* times) {
    std::vector<const Features*> f;
    for (const AudioFeatures* c : clips) {
        const auto* x = dynamic_cast<const ClipFeatures*>(c);
        if (!x) throw Error(ErrorKind::Internal, "embed_features: features made by another model's audio_features");
        f.push_back(&x->f);
    }
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<AudioEmbedding> out;
    const int chunk = config_.audio.chunk_frames();
    for (size_t i = 0; i < f.size();) {
        // One pass: as many clips as max_per_pass and the chunk cap allow (at least one).
        const size_t first = i;
        int chunks = f[i]->frames / chunk;
        for (++i; i < f.size() && static_cast<int>(i - first) < max_per_pass &&
                  chunks + f[i]->frames / chunk <= kMaxChunksPerPass;
             ++i)
            chunks += f[i]->frames / chunk;
        std::vector<std::vector<float>> rows =
            encoder_->encode_batch(std::span<const Features* const>(f).subspan(first, i - first));
        for (size_t k = first; k < i; ++k)
            out.push_back({std::move(rows[k - first]), encoder_->tokens(f[k]->valid_frames)});
    }
    if (times) times->encode += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

std::string Qwen3AsrModel::language_code(const std::string& code_or_name) const {
    const auto l = find_language(code_or_name);
    if (!l)
        throw Error(ErrorKind::InvalidArgument,
                    "language '" + code_or_name.substr(0, 100) + "' is not one Qwen3-ASR knows: " + language_list());
    return l->code;
}

std::vector<int32_t> Qwen3AsrModel::prompt(int n_audio, const std::string& context, const std::string& code,
                                           int* audio_position) const {
    std::string name;
    if (!code.empty()) name = find_language(code).value_or(Language{"", ""}).name;
    return prompt_for(n_audio, context, name, audio_position);
}

AudioLanguageModel::Output Qwen3AsrModel::parse(std::span<const int32_t> generated, const std::string& forced) const {
    // <asr_text> is not special: decoding without special tokens keeps it, drops the stop token.
    // Loops are collapsed before parsing, as the toolkit's parse_asr_output does.
    const ParsedOutput p = parse_output_fixing_loops(decoder_->tokenizer().decode(generated, /*skip_special=*/true));
    Output out;
    out.text = p.transcription;
    out.no_speech = p.no_speech;
    if (!forced.empty()) {
        out.language_code = forced;
    } else if (const auto l = find_language(p.language)) {
        out.language_code = l->code;
    }
    return out;
}

}  // namespace parlance::qwen3_asr
