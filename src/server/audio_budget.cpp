// The decoded-audio memory budget (see audio_budget.h).
#include "server/audio_budget.h"

#include <string>

#include "core/error.h"

namespace parlance::server {

AudioBudget::Lease& AudioBudget::Lease::operator=(Lease&& o) noexcept {
    if (this != &o) {
        release();
        budget_ = o.budget_;
        bytes_ = o.bytes_;
        o.budget_ = nullptr;
    }
    return *this;
}

void AudioBudget::Lease::release() {
    if (budget_) budget_->give_back(bytes_);
    budget_ = nullptr;
    bytes_ = 0;
}

bool AudioBudget::Lease::resize(size_t bytes, const std::atomic<bool>* cancelled, std::chrono::milliseconds wait) {
    if (!budget_) return false;
    if (bytes <= bytes_) {
        budget_->give_back(bytes_ - bytes);
        bytes_ = bytes;
        return true;
    }
    if (!budget_->grow(bytes - bytes_, cancelled, std::chrono::steady_clock::now() + wait)) return false;
    bytes_ = bytes;
    return true;
}

AudioBudget::Lease AudioBudget::acquire(size_t bytes, const std::atomic<bool>* cancelled) {
    if (bytes > capacity_)
        throw Error(ErrorKind::TooLarge, "the audio needs " + std::to_string(bytes >> 20) +
                                             " MiB decoded, more than the server's audio memory (" +
                                             std::to_string(capacity_ >> 20) + " MiB, --audio-memory-mb)");
    grow(bytes, cancelled, std::chrono::steady_clock::time_point::max());
    return Lease(this, bytes);
}

bool AudioBudget::grow(size_t extra, const std::atomic<bool>* cancelled,
                       std::chrono::steady_clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mutex_);
    ++waiting_;
    // Wakes on every release, and every 100 ms to look at the cancellation flag.
    while (used_ + extra > capacity_) {
        if (cancelled && cancelled->load()) {
            --waiting_;
            throw Error(ErrorKind::Cancelled, "cancelled while waiting for audio memory");
        }
        const auto now = std::chrono::steady_clock::now();
        if (now >= deadline) {
            --waiting_;
            return false;
        }
        freed_.wait_until(lock, std::min(deadline, now + std::chrono::milliseconds(100)));
    }
    --waiting_;
    used_ += extra;
    return true;
}

void AudioBudget::give_back(size_t bytes) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        used_ -= bytes;
    }
    freed_.notify_all();
}

size_t AudioBudget::used() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return used_;
}

int AudioBudget::waiting() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return waiting_;
}

}  // namespace parlance::server
