// Writes whisper.cpp ggml .bin files (the format whisper.cpp's convert-*-to-ggml.py produce).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/tensor_data.h"

namespace parlance {

// whisper.cpp's hyper-parameters, in file order.
struct WhisperCppHparams {
    int32_t n_vocab = 0;
    int32_t n_audio_ctx = 0;
    int32_t n_audio_state = 0;
    int32_t n_audio_head = 0;
    int32_t n_audio_layer = 0;
    int32_t n_text_ctx = 0;
    int32_t n_text_state = 0;
    int32_t n_text_head = 0;
    int32_t n_text_layer = 0;
    int32_t n_mels = 0;
    int32_t ftype = 0;  // 0 = all f32, 1 = f16 weights (whisper.cpp's convention)
};

struct WhisperCppContents {
    WhisperCppHparams hparams;
    int32_t n_mel = 0;                  // mel filter bank rows
    int32_t n_fft = 0;                  // mel filter bank columns (n_fft / 2 + 1 bins)
    std::vector<float> mel_filters;     // n_mel * n_fft values, row-major
    std::vector<std::string> vocab;     // token id -> raw bytes
    std::vector<TensorData> tensors;    // ggml names, any ggml type, at most 4 dimensions
};

// Throws Error(InvalidArgument) when mel_filters.size() != n_mel * n_fft or a tensor is
// inconsistent, Error(Io) naming the file when it cannot be written.
void write_whispercpp(const std::filesystem::path& file, const WhisperCppContents& contents);

}  // namespace parlance
