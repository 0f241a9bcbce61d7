// Features made ahead of the encoder (see feature_stage.h).
#include "engine/feature_stage.h"

#include <algorithm>

namespace parlance {

FeatureStage::FeatureStage(const AudioLanguageModel& model, int threads)
    : model_(model), n_threads_(std::max(1, threads)) {
    try {
        for (int t = 0; t < n_threads_; ++t) workers_.emplace_back([this] { work(); });
    } catch (...) {
        stop();  // the workers started
        throw;
    }
}

FeatureStage::~FeatureStage() {
    stop();
}

void FeatureStage::stop() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
        queue_.clear();
    }
    wake_.notify_all();
    for (std::thread& t : workers_)
        if (t.joinable()) t.join();
}

std::future<FeatureStage::Features> FeatureStage::add(std::vector<float> samples,
                                                      std::shared_ptr<std::atomic<bool>> cancelled) {
    std::future<Features> f;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        queue_.push_back({std::move(samples), std::move(cancelled), {}});
        f = queue_.back().made.get_future();
    }
    wake_.notify_one();
    return f;
}

void FeatureStage::work() {
    for (;;) {
        Clip c;
        int threads = 1;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
            if (stopping_) return;
            c = std::move(queue_.front());
            queue_.pop_front();
            ++busy_;
            // The cores shared between the clips being made and those waiting: a lone clip (one
            // live request) is split across all of them, a burst's clips take one each.
            const int sharing = busy_ + static_cast<int>(queue_.size());
            threads = std::max(1, n_threads_ / sharing);
        }
        try {
            if (c.cancelled && c.cancelled->load())
                c.made.set_value(nullptr);
            else
                c.made.set_value(model_.audio_features(c.samples, threads));
        } catch (...) {
            c.made.set_exception(std::current_exception());
        }
        std::lock_guard<std::mutex> lock(mutex_);
        --busy_;
    }
}

}  // namespace parlance
