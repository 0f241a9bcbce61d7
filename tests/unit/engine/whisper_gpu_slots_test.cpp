// How many requests Whisper serves at once on a GPU when serve's --cache-slots is left to the
// device: each request holds its window's cross-attention cache (f16, 2 x decoder layers x d_model
// x 1500 frames) beside the KV cache, so half the memory the KV cache leaves goes to them, within
// [16, 256] slots.
#include <gtest/gtest.h>

#include "core/backend.h"
#include "models/whisper/model.h"
#include "models/whisper/speech.h"
#include "test_support.h"

namespace parlance::whisper {
namespace {

TEST(WhisperGpuSlots, FollowTheMemoryTheCrossAttentionCachesTake) {
    Backend backend{BackendOptions{}};
    auto model = WhisperModel::load(testing::fixtures_dir() / "whisper/tiny-en/model", backend);
    const WhisperConfig c = model->config;
    WhisperSpeechModel speech(std::move(model), backend, generation_decode_service_factory());
    const size_t per_request = 2 * size_t(c.decoder_layers) * c.d_model * c.max_source_positions * 2;
    EXPECT_EQ(speech.gpu_cache_slots(0), 16) << "never fewer than 16";
    EXPECT_EQ(speech.gpu_cache_slots(2 * 100 * per_request), 100);
    EXPECT_EQ(speech.gpu_cache_slots(size_t(1) << 50), 256) << "at most 256";
}

}  // namespace
}  // namespace parlance::whisper
