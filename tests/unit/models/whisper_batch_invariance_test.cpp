// Continuous batching is only correct if a sequence's logits do not depend on what it is batched
// with: the engine promises results identical to running each request alone. Checked at the
// logit level, bit for bit: one sequence decoded alone, then again inside steps that carry other
// sequences (other audio, other prompt lengths, joining and leaving between steps).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>

#include <ggml-cpu.h>
#include <nlohmann/json.hpp>

#include "audio/wav.h"
#include "core/safetensors_writer.h"
#include "core/tensor_store.h"
#include "models/whisper/model.h"
#include "models/whisper/runner.h"
#include "test_support.h"

namespace parlance::whisper {
namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Two different inputs: jfk into `a`, its second half into `b`.
void encode_jfk_and_its_second_half(const WhisperModel& model, WhisperRunner& runner, CrossKv& a, CrossKv& b) {
    const std::vector<float> pcm = read_wav_file(testing::fixtures_dir() / "audio" / "jfk.wav").samples;
    std::vector<std::vector<float>> mels(2);
    int frames = 0;
    mels[0] = model.mel->compute(pcm, &frames);
    mels[1] = model.mel->compute(std::span<const float>(pcm).subspan(pcm.size() / 2), &frames);
    CrossKv* crosses[] = {&a, &b};
    runner.encode(mels, crosses);
}

TEST(WhisperBatchInvariance, LogitsDoNotDependOnTheBatch) {
    // llamafile's tiled products sum in an order that depends on the number of columns; setup.sh
    // builds ggml without them for this guarantee, a system ggml may have them.
    if (ggml_cpu_has_llamafile()) GTEST_SKIP() << "ggml built with llamafile: no bit-identical batching";
    BackendOptions bo;
    bo.threads = 2;
    Backend backend(bo);
    auto model = WhisperModel::load(testing::fixtures_dir() / "whisper" / "tiny-multi" / "model", backend);
    const int kSeqs = 6;
    WhisperRunner runner(model->config, *model->weights, backend, kSeqs);
    CrossKv a(model->config, backend), b(model->config, backend);
    encode_jfk_and_its_second_half(*model, runner, a, b);

    const SpecialTokens& t = model->tokens;
    const std::vector<int> prompt = {t.sot, t.language_token("en"), t.transcribe, t.notimestamps};
    const std::vector<int> steps = {300, 1200, 45, 7000, 220, 13};

    // Alone: slot 0, audio a.
    std::vector<std::vector<float>> alone;
    DecodeItem it{0, &a, prompt, 0};
    alone.push_back(runner.decode(std::span<const DecodeItem>(&it, 1))[0]);
    for (size_t i = 0; i < steps.size(); ++i) {
        it = DecodeItem{0, &a, {steps[i]}, static_cast<int>(prompt.size() + i)};
        alone.push_back(runner.decode(std::span<const DecodeItem>(&it, 1))[0]);
    }

    // Batched: the same sequence in slot 3, among others that start and stop at other steps.
    std::vector<std::vector<float>> batched;
    std::vector<DecodeItem> items = {
        DecodeItem{1, &b, {t.sot, t.language_token("de")}, 0}, DecodeItem{3, &a, prompt, 0},
        DecodeItem{5, &b, {t.sot, t.language_token("en"), t.translate, 50, 60, 70, 80}, 0}};
    batched.push_back(runner.decode(items)[1]);
    std::vector<int> past = {2, static_cast<int>(prompt.size()), 7};
    for (size_t i = 0; i < steps.size(); ++i) {
        std::vector<DecodeItem> step;
        step.push_back(DecodeItem{1, &b, {400 + static_cast<int>(i)}, past[0]++});
        step.push_back(DecodeItem{3, &a, {steps[i]}, past[1]++});
        if (i < 3) step.push_back(DecodeItem{5, &b, {90 + static_cast<int>(i)}, past[2]++});
        if (i >= 2) step.push_back(DecodeItem{4, &a, {t.sot, t.language_token("en"), t.transcribe}, 0});  // an arrival
        auto out = runner.decode(step);
        batched.push_back(out[1]);  // slot 4 restarts at n_past 0 each time: a prompt step beside one-token steps
    }
    ASSERT_EQ(alone.size(), batched.size());
    for (size_t i = 0; i < alone.size(); ++i) EXPECT_TRUE(same_bits(alone[i], batched[i])) << "step " << i;
}

// tiny-multi with `layers` decoder layers: layer i repeats the fixture's layer i % 2.
std::filesystem::path deep_decoder_copy(const testing::TempDir& tmp, int layers) {
    const std::filesystem::path dir = tmp / "model";
    std::filesystem::copy(testing::fixtures_dir() / "whisper" / "tiny-multi" / "model", dir);
    nlohmann::json config = nlohmann::json::parse(testing::read_file(dir / "config.json"));
    config["decoder_layers"] = layers;
    testing::write_file(dir / "config.json", config.dump());
    std::vector<TensorData> tensors;
    {
        auto store = TensorStore::open(dir / "model.safetensors");
        const std::string prefix = "model.decoder.layers.";
        for (const TensorInfo& t : store->tensors()) {
            std::vector<uint8_t> bytes(t.data, t.data + t.nbytes);
            if (t.name.rfind(prefix, 0) != 0) {
                tensors.push_back({t.name, t.type, t.shape, std::move(bytes)});
                continue;
            }
            const size_t dot = t.name.find('.', prefix.size());
            const int source = std::stoi(t.name.substr(prefix.size(), dot - prefix.size()));
            for (int l = source; l < layers; l += 2)
                tensors.push_back({prefix + std::to_string(l) + t.name.substr(dot), t.type, t.shape, bytes});
        }
    }
    write_safetensors(dir / "model.safetensors", tensors);
    return dir;
}

// The engine encodes the windows of several requests in one graph: a window's encoder output
// (and so its cross-attention K/V, and the request's transcript) must be the same bits alone and
// beside others. On the CPU the encoder's products are the multi-column kernel's and its attention
// ggml's fused kernel (OpenBLAS's products differed in the last bits with the batch: 4.5e-6).
TEST(WhisperBatchInvariance, AWindowEncodesTheSameAloneAndInABatch) {
    if (ggml_cpu_has_llamafile()) GTEST_SKIP() << "ggml built with llamafile: no bit-identical batching";
    Backend backend(BackendOptions{"cpu", 2, true});
    auto model = WhisperModel::load(testing::fixtures_dir() / "whisper" / "tiny-multi" / "model", backend);
    WhisperRunner runner(model->config, *model->weights, backend, 1);
    const std::vector<float> pcm = read_wav_file(testing::fixtures_dir() / "audio" / "jfk.wav").samples;
    int frames = 0;
    std::vector<std::vector<float>> mels = {
        model->mel->compute(pcm, &frames),
        model->mel->compute(std::span<const float>(pcm).subspan(pcm.size() / 3), &frames),
        model->mel->compute(std::span<const float>(pcm).first(pcm.size() / 2), &frames)};
    CrossKv c0(model->config, backend), c1(model->config, backend), c2(model->config, backend);
    std::vector<std::vector<float>> alone, batched;
    CrossKv* one[] = {&c0};
    runner.encode(std::span<const std::vector<float>>(mels.data(), 1), one, &alone);
    CrossKv* three[] = {&c0, &c1, &c2};
    runner.encode(mels, three, &batched);
    ASSERT_EQ(batched.size(), 3u);
    EXPECT_TRUE(same_bits(alone[0], batched[0]));
    EXPECT_FALSE(same_bits(batched[0], batched[1]));  // the others are other audio
    // The last one alone too: its place in the batch changes nothing either.
    CrossKv* last[] = {&c2};
    runner.encode(std::span<const std::vector<float>>(mels.data() + 2, 1), last, &alone);
    EXPECT_TRUE(same_bits(alone[0], batched[2]));
}

TEST(WhisperBatchInvariance, AStepTooLargeForOneGraphRunsAsSeveralWithTheSameBits) {
    if (ggml_cpu_has_llamafile()) GTEST_SKIP() << "ggml built with llamafile: no bit-identical batching";
    BackendOptions bo;
    bo.threads = 2;
    Backend backend(bo);
    testing::TempDir tmp;
    auto model = WhisperModel::load(deep_decoder_copy(tmp, 32), backend);
    ASSERT_EQ(model->config.decoder_layers, 32);
    // 100 sequences that alternate between two windows: 100 runs of cross-attention, ~67,000
    // nodes on 32 layers, more than one graph holds (this step used to be refused).
    const int kItems = 100;
    WhisperRunner runner(model->config, *model->weights, backend, kItems, /*kv_blocks=*/2 * kItems);
    CrossKv a(model->config, backend), b(model->config, backend);
    encode_jfk_and_its_second_half(*model, runner, a, b);

    const SpecialTokens& t = model->tokens;
    std::vector<DecodeItem> items;
    for (int i = 0; i < kItems; ++i)
        items.push_back(DecodeItem{i, i % 2 ? &b : &a, {t.sot, t.language_token("en"), t.transcribe, 300 + i}, 0});
    const std::vector<std::vector<float>> together = runner.decode(items);
    ASSERT_EQ(together.size(), items.size());
    for (int i = 0; i < kItems; ++i) {
        const auto alone = runner.decode(std::span<const DecodeItem>(&items[i], 1));  // n_past 0: recomputed
        EXPECT_TRUE(same_bits(alone[0], together[i])) << "sequence " << i;
    }
}

}  // namespace
}  // namespace parlance::whisper
