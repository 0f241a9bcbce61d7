// Conversion of a Whisper HF checkpoint directory to whisper.cpp's ggml .bin format, so that
// whisper.cpp (our bench anchor) and parlance can run the same weights.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <ggml.h>

#include "models/conversion.h"

namespace parlance::whisper {

using WhisperCppConvertOptions = ConvertOptions;
using WhisperCppConvertResult = ConvertResult;

// Reads the HF snapshot directory `hf_dir` (config.json, generation_config.json, tokenizer.json,
// model.safetensors[.index.json]), validates it against the Whisper tensor table, and writes
// `out`: whisper.cpp's hparams, the mel filter bank (n_mels x 201, f32), the text vocabulary as
// raw bytes and every tensor under its whisper.cpp name (proj_out is dropped: whisper.cpp ties
// the output projection to the token embedding).
// Throws Error(InvalidArgument) for a path that is not an HF directory or an unsupported dtype,
// Error(InvalidModel) naming the file and field/tensor for a malformed checkpoint,
// Error(Unsupported) for what whisper.cpp files cannot express (untied proj_out, special tokens
// outside whisper.cpp's fixed layout; an FFN width other than 4x is only a warning), Error(Io) when the output cannot be written.
WhisperCppConvertResult convert_to_whispercpp(const std::filesystem::path& hf_dir,
                                              const std::filesystem::path& out,
                                              const WhisperCppConvertOptions& options = {});

}  // namespace parlance::whisper
