// Silero VAD v5, ported: speech probabilities for windows of 32 ms (512 samples at 16 kHz, 256 at
// 8 kHz), loaded from the real silero_vad_v5.onnx. Each window is prefixed by the last 64 (32)
// samples before it and the LSTM state is carried from window to window, exactly as the official
// OnnxWrapper runs the model, so probabilities match onnxruntime's (tests/fixtures/silero_vad).
//
// Thread-safe: streams of different live sessions may push from different threads (the
// graphs run one at a time; give the VAD its own Backend, apart from the speech model's).
//
// The model: reflect-pad right by 64 (32), an STFT as a convolution with the stored basis (256
// (128) taps, hop 128 (64), magnitudes of 129 (65) bins over 4 frames), four 3-tap convolutions
// with ReLU (stride 1, 2, 2, 1; 128, 64, 64, 128 channels), an LSTM cell of 128, then
// sigmoid(conv1x1(relu(h))). The front end and convolutions of many windows run as one ggml graph
// (they do not depend on the state); the recurrence, 128 wide and sequential by nature, runs on
// the host, where a graph per step would cost more than the step.
#pragma once

#include <ggml-backend.h>
#include <ggml.h>

#include <filesystem>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "audio/pcm_source.h"
#include "core/backend.h"
#include "models/voice_activity.h"

namespace parlance::silero_vad {

// What speech_segments makes of probabilities: silero-vad's get_speech_timestamps defaults.
class SileroVad final : public VoiceActivityModel {
public:
    // Throws Error(NotFound) / Error(InvalidModel) naming the file, or the missing or misshaped
    // tensor (silero_vad_legacy.onnx, v4, is refused so).
    SileroVad(const std::filesystem::path& onnx_file, Backend& backend);
    ~SileroVad();
    SileroVad(const SileroVad&) = delete;
    SileroVad& operator=(const SileroVad&) = delete;

    // 512 at 16000 Hz, 256 at 8000 Hz; throws Error(InvalidArgument) for other rates.
    static int samples_per_window(int sample_rate);
    int window_samples(int sample_rate) const override { return samples_per_window(sample_rate); }

    // One probability per window of a whole recording (a last partial window padded with zeros),
    // from a fresh state.
    std::vector<float> probabilities(std::span<const float> pcm, int sample_rate) override;
    // The same for audio at `sample_rate` read as it is decoded (a long file): a few thousand
    // windows are held at a time and released behind; the same probabilities bit for bit.
    std::vector<float> probabilities(PcmSource& audio, int sample_rate) override;

    std::unique_ptr<VoiceActivityStream> stream(int sample_rate) override;

    // A live stream: windows pushed one at a time, state and context carried between them.
    class Stream final : public VoiceActivityStream {
    public:
        Stream(SileroVad& vad, int sample_rate);
        // Exactly window_samples(rate) samples; returns the window's speech probability.
        float push(std::span<const float> window) override;
        void reset() override;
        int sample_rate() const override { return rate_; }

    private:
        SileroVad& vad_;
        int rate_;
        std::vector<float> context_, h_, c_;
    };

    struct Rate;  // the weights of one sample rate (internal)

private:
    // Runs the front end and convolutions for n windows whose inputs (context + window each) are
    // given back to back; returns the LSTM input products W_ih·x + b_ih, [n][512].
    std::vector<float> encode(const Rate& r, std::span<const float> inputs, int n);
    float step(const Rate& r, const float* gates_in, std::vector<float>& h, std::vector<float>& c) const;
    const Rate& rate(int sample_rate) const;

    Backend& backend_;
    std::unique_ptr<Rate> r16_, r8_;
    ggml_context* weights_ctx_ = nullptr;
    ggml_backend_buffer_t weights_buf_ = nullptr;
    std::vector<uint8_t> graph_buf_;
    std::mutex mutex_;  // streams of several sessions share the graph buffer and the backend
};

}  // namespace parlance::silero_vad
