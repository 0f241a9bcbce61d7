// A voice-activity model, as the CLI and the server see it: speech probabilities per window of a
// recording or of a live stream, and the speech segments they make. The registry loads one
// (models/registry.h load_voice_activity_model); nothing above models/ knows its architecture
// (today Silero VAD v5, models/silero_vad).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "audio/pcm_source.h"

namespace parlance {

// A live stream's state: windows pushed one at a time, whatever the model carries between them
// (context samples, recurrent state) kept here, so sessions share one model.
class VoiceActivityStream {
public:
    virtual ~VoiceActivityStream() = default;
    // Exactly window_samples(sample_rate()) samples; returns the window's speech probability.
    virtual float push(std::span<const float> window) = 0;
    // Back to the state of a fresh stream.
    virtual void reset() = 0;
    virtual int sample_rate() const = 0;
};

class VoiceActivityModel {
public:
    virtual ~VoiceActivityModel() = default;
    // Samples per window at this rate; throws Error(InvalidArgument) for a rate the model lacks.
    virtual int window_samples(int sample_rate) const = 0;
    // One probability per window of a whole recording (a last partial window padded with zeros),
    // from a fresh state.
    virtual std::vector<float> probabilities(std::span<const float> pcm, int sample_rate) = 0;
    // The same for audio read as it is decoded (a long file), in bounded memory: the same values.
    virtual std::vector<float> probabilities(PcmSource& audio, int sample_rate) = 0;
    // A live stream at this rate. Thread-safe: streams of different sessions may push from
    // different threads.
    virtual std::unique_ptr<VoiceActivityStream> stream(int sample_rate) = 0;
};

struct SpeechSegmentOptions {
    float threshold = 0.5f;       // speech starts at a window at or above this
    float neg_threshold = -1.0f;  // and ends below this (< 0: threshold - 0.15, at least 0.01)
    int min_speech_ms = 250;      // shorter segments are dropped
    int min_silence_ms = 100;     // a pause must last this long to end a segment
    int speech_pad_ms = 30;       // added on both sides (halving the gap when segments are close)
};

struct SpeechSegment {
    double start = 0.0;  // seconds
    double end = 0.0;
};

// Speech segments from per-window probabilities (windows of window_samples at sample_rate, of a
// recording of total_samples), as silero-vad's get_speech_timestamps cuts them: hysteresis
// between threshold and neg_threshold, a minimum pause and length, padding. In seconds, in
// order, never overlapping.
std::vector<SpeechSegment> speech_segments(std::span<const float> probabilities, int64_t window_samples,
                                           int sample_rate, size_t total_samples,
                                           const SpeechSegmentOptions& options = {});

}  // namespace parlance
