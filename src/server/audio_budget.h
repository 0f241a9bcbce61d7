// A byte budget for the decoded audio that requests hold at once (decoding, queued or being
// transcribed). A compressed upload of a few MB can expand to hundreds of MB of PCM: without a
// budget, a handful of such uploads at once take gigabytes however few workers there are.
// A request leases what its audio needs before decoding (from the container's declared duration,
// else the length limit's worst case) and waits while the budget is full; the lease is returned
// when the request ends. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <mutex>

namespace parlance::server {

// Bytes of decoded audio (16 kHz mono float) for a duration.
inline size_t pcm_bytes(double seconds) {
    return static_cast<size_t>(std::ceil(seconds * 16000.0)) * sizeof(float);
}

class AudioBudget {
public:
    explicit AudioBudget(size_t capacity_bytes) : capacity_(capacity_bytes) {}

    class Lease {
    public:
        Lease() = default;
        Lease(AudioBudget* budget, size_t bytes) : budget_(budget), bytes_(bytes) {}
        ~Lease() { release(); }
        Lease(Lease&& o) noexcept : budget_(o.budget_), bytes_(o.bytes_) { o.budget_ = nullptr; }
        Lease& operator=(Lease&& o) noexcept;
        Lease(const Lease&) = delete;
        Lease& operator=(const Lease&) = delete;
        size_t bytes() const { return bytes_; }
        // Grows (waiting at most `wait` for room) or shrinks the lease to `bytes`; false when
        // the room did not come in time (the lease keeps its old size).
        bool resize(size_t bytes, const std::atomic<bool>* cancelled, std::chrono::milliseconds wait);
        void release();

    private:
        AudioBudget* budget_ = nullptr;
        size_t bytes_ = 0;
    };

    // Waits until `bytes` fit beside the other leases; throws Error(Cancelled) when *cancelled
    // turns true first and Error(TooLarge) when bytes exceed the whole capacity.
    Lease acquire(size_t bytes, const std::atomic<bool>* cancelled);

    size_t capacity() const { return capacity_; }
    size_t used() const;
    int waiting() const;

private:
    bool grow(size_t extra, const std::atomic<bool>* cancelled, std::chrono::steady_clock::time_point deadline);
    void give_back(size_t bytes);

    const size_t capacity_;
    mutable std::mutex mutex_;
    std::condition_variable freed_;
    size_t used_ = 0;
    int waiting_ = 0;
};

}  // namespace parlance::server
