// Whisper as a SpeechModel (models/speech_model.h): what the registry hands the CLI and the
// server. It owns the loaded model; transcribe() encodes on a runner it keeps and decodes on the
// engine layer's service (open_speech_model hands in its factory; the service is sized for the
// largest beam size asked so far); start_engine() starts a WhisperEngine on the same factory.
#pragma once

#include <filesystem>
#include <memory>

#include "core/backend.h"
#include "models/speech_model.h"
#include "models/whisper/decoder.h"
#include "models/whisper/model.h"
#include "models/whisper/runner.h"

namespace parlance::whisper {

class WhisperSpeechModel : public SpeechModel {
public:
    WhisperSpeechModel(std::unique_ptr<WhisperModel> model, Backend& backend, DecodeServiceFactory decode_service);

    std::string description() const override;
    double load_seconds() const override { return model_->load_seconds; }
    int default_beam_size() const override;
    int gpu_cache_slots(size_t spare_bytes) const override;
    using SpeechModel::transcribe;
    Transcript transcribe(PcmSource& audio16k, const TranscribeOptions& options) override;
    std::unique_ptr<SpeechEngine> start_engine(const EngineOptions& options, Logger& logger) override;

    const WhisperModel& model() const { return *model_; }

private:
    std::unique_ptr<WhisperModel> model_;
    Backend& backend_;
    DecodeServiceFactory decode_service_;
    std::unique_ptr<WhisperRunner> runner_;    // for transcribe(): encodes, aligns words
    std::unique_ptr<WhisperDecoder> decoder_;  // for transcribe(): what decode_service_ steps
    std::unique_ptr<DecodeService> service_;   // for transcribe(): kept, regrown for more beams
    int service_beams_ = 0;                    // the beams service_ was sized for
};

}  // namespace parlance::whisper
