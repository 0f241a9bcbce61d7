// The audio-LM interface's defaults (see audio_language_model.h).
#include "models/audio_language_model.h"

#include "core/error.h"

namespace parlance {
namespace {

// A model without a host half: its clip's samples, for embed_audio.
struct SamplesOnly final : AudioLanguageModel::AudioFeatures {
    std::vector<float> pcm;
};

}  // namespace

std::unique_ptr<AudioLanguageModel::AudioFeatures> AudioLanguageModel::audio_features(std::span<const float> pcm16k,
                                                                                      int threads) const {
    (void)threads;
    auto f = std::make_unique<SamplesOnly>();
    f->pcm.assign(pcm16k.begin(), pcm16k.end());
    return f;
}

std::vector<AudioLanguageModel::AudioEmbedding> AudioLanguageModel::embed_features(
    std::span<const AudioFeatures* const> clips, int max_per_pass, EmbedTimes* times) {
    (void)max_per_pass;
    std::vector<AudioEmbedding> out(clips.size());
    for (size_t i = 0; i < clips.size(); ++i) {
        const auto* s = dynamic_cast<const SamplesOnly*>(clips[i]);
        if (!s) throw Error(ErrorKind::Internal, "embed_features: features made by another model's audio_features");
        out[i].rows = embed_audio(s->pcm, &out[i].tokens, times);
    }
    return out;
}

}  // namespace parlance
