// A Prometheus histogram of latencies (cumulative buckets, sum, count), thread-safe, and the
// latency histograms of the generation APIs: time to first token, between tokens, end to end.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace parlance::server {

class LatencyHistogram {
public:
    explicit LatencyHistogram(std::vector<double> upper_bounds);
    void observe(double seconds);
    // "# HELP/# TYPE" lines and the series of `name` (histogram type).
    std::string render(const std::string& name, const std::string& help) const;

private:
    std::vector<double> bounds_;
    mutable std::mutex mutex_;
    std::vector<uint64_t> counts_;  // per bucket (not cumulative); the last is +Inf
    double sum_ = 0.0;
    uint64_t count_ = 0;
};

struct GenerationLatency {
    LatencyHistogram first_token{{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}};
    LatencyHistogram inter_token{{0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56}};
    LatencyHistogram end_to_end{{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}};
    std::string render() const;
};

}  // namespace parlance::server
