// Whisper as a SpeechModel (see speech.h).
#include "models/whisper/speech.h"

#include <algorithm>
#include <sstream>

#include "core/error.h"
#include "decoding/search.h"
#include "models/whisper/decoder.h"
#include "models/whisper/engine.h"
#include "models/whisper/transcriber.h"

namespace parlance::whisper {
namespace {

// ", English" for .en models, ", language en" for a model prompted in one language only (ours),
// ", multilingual (N languages)" otherwise.
std::string languages_of(const SpecialTokens& t) {
    if (!t.multilingual) return ", English";
    if (t.languages.size() == 1) return ", language " + t.languages.begin()->first;
    return ", multilingual (" + std::to_string(t.languages.size()) + " languages)";
}

// ", 10 s windows" when the model encodes windows other than Whisper's 30 s (--audio-window).
std::string window_of(const WhisperConfig& c) {
    if (c.max_source_positions == 1500) return "";
    std::ostringstream os;
    os << ", " << c.max_source_positions / 50.0 << " s windows";
    return os.str();
}

}  // namespace

WhisperSpeechModel::WhisperSpeechModel(std::unique_ptr<WhisperModel> model, Backend& backend,
                                       DecodeServiceFactory decode_service)
    : model_(std::move(model)), backend_(backend), decode_service_(std::move(decode_service)) {
    if (!decode_service_)
        throw Error(ErrorKind::Internal,
                    "a Whisper model opens through open_speech_model (its decodes need the engine)");
}

std::string WhisperSpeechModel::description() const {
    const WhisperConfig& c = model_->config;
    return "whisper " + std::to_string(c.encoder_layers) + "+" + std::to_string(c.decoder_layers) +
           " layers, d_model " + std::to_string(c.d_model) + window_of(c) + languages_of(model_->tokens);
}

int WhisperSpeechModel::default_beam_size() const {
    return model_->tokens.num_beams;
}

// Each request holds its window's cross-attention keys and values (f16: 245 MB at large-v3, 31 MB
// at large-v3-turbo's 4 decoder layers) beside its blocks of the KV cache: half the spare memory
// goes to them, which gives large-v3 ~70 requests at once on an 80 GB card and turbo the cap.
int WhisperSpeechModel::gpu_cache_slots(size_t spare_bytes) const {
    const WhisperConfig& c = model_->config;
    const size_t per_request = 2 * static_cast<size_t>(c.decoder_layers) * c.d_model * c.max_source_positions * 2;
    const size_t fit = spare_bytes / 2 / std::max<size_t>(1, per_request);
    return static_cast<int>(std::clamp<size_t>(fit, 16, 256));
}

Transcript WhisperSpeechModel::transcribe(PcmSource& audio16k, const TranscribeOptions& options) {
    const int beams = *with_model_defaults(options, model_->tokens).beam_size;
    // The decodes on the engine layer's service, sized for this request's worst case; the runner
    // encodes and aligns.
    if (!runner_) runner_ = std::make_unique<WhisperRunner>(model_->config, *model_->weights, backend_, 1);
    if (!decoder_) decoder_ = std::make_unique<WhisperDecoder>(*model_, backend_);
    if (!service_ || service_beams_ < beams) {
        service_.reset();  // its cache first: the two need not be held at once
        service_ = transcription_service(decode_service_, *decoder_, backend_, model_->config, beams);
        service_beams_ = beams;
    }
    return whisper::transcribe(*model_, *runner_, *service_, audio16k, options);
}

std::unique_ptr<SpeechEngine> WhisperSpeechModel::start_engine(const EngineOptions& options, Logger& logger) {
    EngineOptions o = options;
    if (!o.decode_service) o.decode_service = decode_service_;  // the server's: the same engine layer
    return std::make_unique<WhisperEngine>(*model_, backend_, o, logger);
}

}  // namespace parlance::whisper
