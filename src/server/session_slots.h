// The live-session limit (--max-sessions), taken atomically: a slot is claimed with one
// compare-and-swap when a /v1/realtime upgrade is accepted and given back when the connection
// that holds it is destroyed, so no number of simultaneous opens gets past the limit (a check of
// the live count followed by a later increment let 200 concurrent opens through to 151 sessions).
#pragma once

#include <atomic>
#include <memory>

namespace parlance::server {

class SessionSlots {
public:
    explicit SessionSlots(int limit) : limit_(limit), taken_(std::make_shared<std::atomic<int>>(0)) {}

    // Held by a session's connection; the slot is free again when the last copy goes.
    class Slot {
    public:
        explicit Slot(std::shared_ptr<std::atomic<int>> taken) : taken_(std::move(taken)) {}
        ~Slot() { --*taken_; }
        Slot(const Slot&) = delete;
        Slot& operator=(const Slot&) = delete;

    private:
        std::shared_ptr<std::atomic<int>> taken_;  // outlives the server if a connection does
    };

    // A slot, or null when `limit` are taken.
    std::shared_ptr<Slot> try_take() {
        int n = taken_->load();
        do {
            if (n >= limit_) return nullptr;
        } while (!taken_->compare_exchange_weak(n, n + 1));
        return std::make_shared<Slot>(taken_);
    }
    int taken() const { return taken_->load(); }
    int limit() const { return limit_; }

private:
    int limit_;
    std::shared_ptr<std::atomic<int>> taken_;
};

}  // namespace parlance::server
