// Qwen3-ASR's input features, as transformers' Qwen3ASRFeatureExtractor computes them for one
// clip: Whisper's log-mel (128 bins) over the clip's own length — clips under 8000 samples
// (0.5 s) zero-padded to 8000, the padding counted as audio — then the mel axis right-padded with
// zeros to a multiple of the encoder's chunk (100 frames).
#pragma once

#include <span>
#include <vector>

#include "audio/mel.h"

namespace parlance::qwen3_asr {

inline constexpr int kMinSamples = 8000;

struct Features {
    std::vector<float> mel;  // [n_mels, frames] row-major
    int frames = 0;          // padded to a multiple of chunk_frames
    int valid_frames = 0;    // frames of the clip itself
};

Features compute_features(const LogMel& mel, std::span<const float> pcm16k, int chunk_frames, int threads = 1);

}  // namespace parlance::qwen3_asr
