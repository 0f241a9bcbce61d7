// Pieces' features (AudioLanguageModel::audio_features: Qwen3-ASR's log-mel) made on a pool of
// host threads ahead of the encoder. The server's engine hands each piece here as it is cut; the
// encoder's passes find their clips' features made while the previous pass computed, instead of
// making them at the pass's start (on an H100 under load, 2.1 ms of the encoder's 8.5 ms a piece
// went to that wait: BENCHMARKS.md, "The encoder and the step under load").
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "models/audio_language_model.h"

namespace parlance {

class FeatureStage {
public:
    using Features = std::unique_ptr<AudioLanguageModel::AudioFeatures>;

    // `threads` workers (at least one). The model's audio_features runs on them concurrently.
    FeatureStage(const AudioLanguageModel& model, int threads);
    // What is queued is dropped (its futures throw std::future_error); the workers finish the
    // clips they hold and are joined.
    ~FeatureStage();
    FeatureStage(const FeatureStage&) = delete;
    FeatureStage& operator=(const FeatureStage&) = delete;

    // The clip's features, made by the next free worker in the order added (a failure is the
    // future's exception). A clip whose `cancelled` is set before a worker takes it is not made:
    // its future holds null.
    std::future<Features> add(std::vector<float> samples, std::shared_ptr<std::atomic<bool>> cancelled);

    int threads() const { return n_threads_; }

private:
    struct Clip {
        std::vector<float> samples;
        std::shared_ptr<std::atomic<bool>> cancelled;
        std::promise<Features> made;
    };
    void work();
    void stop();

    const AudioLanguageModel& model_;
    const int n_threads_;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<Clip> queue_;  // (mutex_)
    int busy_ = 0;            // (mutex_) workers making a clip's features
    bool stopping_ = false;   // (mutex_)
    std::vector<std::thread> workers_;
};

}  // namespace parlance
