// A loaded Whisper model: validated configuration, special tokens, tokenizer, log-mel front end
// and device weights. Immutable after load and shared by every request and runner.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "audio/mel.h"
#include "core/backend.h"
#include "core/tensor_store.h"
#include "models/whisper/config.h"
#include "models/whisper/weights.h"
#include "text/tokenizer.h"

namespace parlance::whisper {

struct WhisperModel {
    // Loads an HF snapshot directory (config.json, generation_config.json, tokenizer.json,
    // model.safetensors[.index.json]) or a whisper.cpp .bin file. Throws Error(InvalidModel)
    // naming the file and the field or tensor that is wrong.
    static std::unique_ptr<WhisperModel> load(const std::filesystem::path& path, Backend& backend,
                                              const WeightOptions& options = {});

    std::filesystem::path source;
    FileFormat format = FileFormat::Safetensors;
    WhisperConfig config;
    SpecialTokens tokens;
    std::unique_ptr<Tokenizer> tokenizer;
    std::unique_ptr<LogMel> mel;
    std::unique_ptr<WhisperWeights> weights;
    uint64_t bytes_on_disk = 0;
    double load_seconds = 0.0;
};

}  // namespace parlance::whisper
