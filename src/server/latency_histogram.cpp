// LatencyHistogram (see latency_histogram.h).
#include "server/latency_histogram.h"

#include <algorithm>
#include <sstream>

namespace parlance::server {

LatencyHistogram::LatencyHistogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void LatencyHistogram::observe(double seconds) {
    const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), seconds) - bounds_.begin());
    std::lock_guard<std::mutex> lock(mutex_);
    counts_[i]++;
    sum_ += seconds;
    count_++;
}

std::string LatencyHistogram::render(const std::string& name, const std::string& help) const {
    std::ostringstream os;
    std::lock_guard<std::mutex> lock(mutex_);
    os << "# HELP " << name << " " << help << "\n# TYPE " << name << " histogram\n";
    uint64_t cumulative = 0;
    for (size_t i = 0; i < bounds_.size(); ++i) {
        cumulative += counts_[i];
        os << name << "_bucket{le=\"" << bounds_[i] << "\"} " << cumulative << "\n";
    }
    os << name << "_bucket{le=\"+Inf\"} " << count_ << "\n"
       << name << "_sum " << sum_ << "\n"
       << name << "_count " << count_ << "\n";
    return os.str();
}

std::string GenerationLatency::render() const {
    return first_token.render("parlance_chat_time_to_first_token_seconds",
                              "From a generation request's admission to its first token.") +
           inter_token.render("parlance_chat_inter_token_seconds", "Between consecutive tokens of a choice.") +
           end_to_end.render("parlance_chat_request_seconds",
                             "From admission to the last token of a generation request.");
}

}  // namespace parlance::server
