// Qwen3-ASR's input features (see features.h).
#include "models/qwen3_asr/features.h"

#include <algorithm>

namespace parlance::qwen3_asr {

Features compute_features(const LogMel& mel, std::span<const float> pcm16k, int chunk_frames, int threads) {
    std::vector<float> padded;
    if (pcm16k.size() < static_cast<size_t>(kMinSamples)) {
        padded.assign(pcm16k.begin(), pcm16k.end());
        padded.resize(kMinSamples, 0.0f);
        pcm16k = padded;
    }
    LogMelOptions o;
    o.pad_or_trim_to = 0;  // the clip's own length; the clamp's maximum over the whole clip
    o.threads = threads;
    int n = 0;
    const std::vector<float> m = mel.compute(pcm16k, &n, o);
    Features f;
    f.valid_frames = n;
    f.frames = (n + chunk_frames - 1) / chunk_frames * chunk_frames;
    const int bins = mel.n_mels();
    f.mel.assign(static_cast<size_t>(bins) * f.frames, 0.0f);
    for (int b = 0; b < bins; ++b)
        std::copy(m.begin() + static_cast<size_t>(b) * n, m.begin() + static_cast<size_t>(b + 1) * n,
                  f.mel.begin() + static_cast<size_t>(b) * f.frames);
    return f;
}

}  // namespace parlance::qwen3_asr
