// Whisper model loading (see model.h).
#include "models/whisper/model.h"

#include <chrono>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "core/error.h"
#include "core/model_files.h"
#include "models/whisper/tensor_names.h"

namespace parlance::whisper {
namespace {

// <|0.00|> .. <|30.00|> for the ids from timestamp_begin up to vocab_size not already present.
void add_timestamp_tokens(Tokenizer& tok, const SpecialTokens& t, int vocab_size) {
    for (int id = t.timestamp_begin; id < vocab_size; ++id) {
        if (id < static_cast<int>(tok.vocab_size()) && tok.is_special(id)) continue;
        std::ostringstream os;
        os << "<|" << std::fixed << std::setprecision(2) << (id - t.timestamp_begin) * 0.02 << "|>";
        if (!tok.token_to_id(os.str())) tok.add_special_token(os.str(), id);
    }
}

// whisper.cpp files carry only the text vocabulary; the special tokens follow from the layout.
void add_layout_specials(Tokenizer& tok, const SpecialTokens& t, int vocab_size) {
    auto add = [&](const std::string& text, int id) {
        if (id >= 0 && id < vocab_size && !tok.token_to_id(text)) tok.add_special_token(text, id);
    };
    add("<|endoftext|>", t.eot);
    add("<|startoftranscript|>", t.sot);
    for (const auto& [code, id] : t.languages) add("<|" + code + "|>", id);
    add("<|translate|>", t.translate);
    add("<|transcribe|>", t.transcribe);
    add("<|startoflm|>", t.startoflm);
    add("<|startofprev|>", t.startofprev);
    add("<|nospeech|>", t.nospeech);
    add("<|notimestamps|>", t.notimestamps);
    add_timestamp_tokens(tok, t, vocab_size);
}

}  // namespace

std::unique_ptr<WhisperModel> WhisperModel::load(const std::filesystem::path& path, Backend& backend,
                                                 const WeightOptions& options) {
    auto t0 = std::chrono::steady_clock::now();
    ModelFiles files = open_model_files(path);
    auto m = std::make_unique<WhisperModel>();
    m->source = path;
    m->format = files.tensors->format();
    m->bytes_on_disk = files.bytes_on_disk();
    const std::string arch = files.architecture();
    if (arch != "whisper")
        throw Error(ErrorKind::Unsupported,
                    (files.is_directory ? (path / "config.json").string() : path.string()) +
                        ": model_type '" + arch + "' is not Whisper");

    if (m->format == FileFormat::WhisperCpp) {
        m->config = WhisperConfig::from_whispercpp(files.tensors->metadata().at("hparams"), path.string());
        // whisper.cpp's header has no FFN width (its loader assumes 4 * d_model); read it from
        // the first fc1 of each stack so that conversions of other widths load too.
        for (const TensorName& n : whisper_tensor_names(m->config)) {
            if (n.role != TensorRole::Fc1W || n.layer != 0) continue;
            if (const TensorInfo* t = files.tensors->find(n.cpp); t && t->shape.size() == 2)
                (n.decoder ? m->config.decoder_ffn : m->config.encoder_ffn) = static_cast<int>(t->shape[0]);
        }
        m->tokens = special_tokens_from_layout(m->config.vocab_size);
        m->tokenizer = std::make_unique<Tokenizer>(Tokenizer::from_ranked_bytes(files.tensors->vocab_bytes()));
        add_layout_specials(*m->tokenizer, m->tokens, m->config.vocab_size);
    } else {
        const std::string cfg_name = (path / "config.json").string();
        m->config = WhisperConfig::from_hf(files.config, cfg_name);
        m->tokens = special_tokens_from_hf(files.generation_config, m->config.vocab_size,
                                           (path / "generation_config.json").string());
        if (files.tokenizer_json.empty())
            throw Error(ErrorKind::InvalidModel, path.string() + ": missing tokenizer.json");
        m->tokenizer = std::make_unique<Tokenizer>(Tokenizer::from_json_file(files.tokenizer_json));
        name_special_tokens(
            m->tokens,
            [&](const std::string& name) -> std::optional<int> {
                if (auto found = m->tokenizer->token_to_id(name)) return static_cast<int>(*found);
                return std::nullopt;
            },
            (path / "generation_config.json").string());
    }
    // The tokenizer must agree with the weights' vocabulary and the special-token layout.
    auto& tok = *m->tokenizer;
    const std::string tok_name =
        m->format == FileFormat::WhisperCpp ? path.string() : files.tokenizer_json.string();
    if (static_cast<int>(tok.vocab_size()) > m->config.vocab_size)
        throw Error(ErrorKind::InvalidModel,
                    tok_name + ": tokenizer has " + std::to_string(tok.vocab_size()) +
                        " tokens but the model's vocab_size is " + std::to_string(m->config.vocab_size));
    // Older HF snapshots lack the timestamp tokens; they follow from the layout. Every other id
    // must exist, or decoding it would fail mid-request.
    add_timestamp_tokens(tok, m->tokens, m->config.vocab_size);
    for (int id = 0; id < m->config.vocab_size; ++id) {
        try {
            (void)tok.token_bytes(id);
        } catch (const Error&) {
            throw Error(ErrorKind::InvalidModel,
                        tok_name + ": tokenizer has no token " + std::to_string(id) + " (vocab_size " +
                            std::to_string(m->config.vocab_size) + " needs every id below it)");
        }
    }
    auto expect = [&](const char* text, int id) {
        auto got = tok.token_to_id(text);
        if (!got || *got != id)
            throw Error(ErrorKind::InvalidModel,
                        tok_name + ": tokenizer maps " + text + " to " +
                            (got ? std::to_string(*got) : std::string("nothing")) + ", expected " +
                            std::to_string(id) + " from the token layout");
    };
    expect("<|endoftext|>", m->tokens.eot);
    expect("<|startoftranscript|>", m->tokens.sot);
    expect("<|notimestamps|>", m->tokens.notimestamps);

    m->mel = std::make_unique<LogMel>(m->config.n_mels);
    m->weights = std::make_unique<WhisperWeights>(m->config, *files.tensors, backend, options);
    if (options.audio_window_seconds > 0) {
        // A shorter window is the same model with its encoder's position table cut to the first
        // positions (one per 20 ms): what transformers computes for a checkpoint whose
        // max_source_positions is that count, and what whisper.cpp's --audio-ctx does.
        const double full = m->config.max_source_positions / 50.0;
        const double positions = options.audio_window_seconds * 50.0;
        if (positions < 50 || positions > m->config.max_source_positions ||
            std::abs(positions - std::round(positions)) > 1e-6) {
            std::ostringstream os;
            os << "--audio-window " << options.audio_window_seconds << ": a window of 1 to " << full
               << " seconds (the model's own) in steps of 0.02 s";
            throw Error(ErrorKind::InvalidArgument, os.str());
        }
        m->config.max_source_positions = static_cast<int>(std::lround(positions));
    }
    m->load_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return m;
}

}  // namespace parlance::whisper
