// Prometheus metrics of the server: request counts by route and status, latency histograms,
// audio seconds, and gauges read from the engine and the process at scrape time. Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/ggml_messages.h"
#include "engine/generation_service.h"
#include "models/speech_model.h"

namespace parlance::server {

class Metrics {
public:
    void observe(const std::string& route, int status, double seconds, double audio_seconds);
    // The text exposition format (version 0.0.4).
    std::string render(const EngineStats* engine, double uptime_seconds) const;

private:
    struct Histogram {
        std::vector<uint64_t> buckets;  // cumulative at render time
        double sum = 0.0;
        uint64_t count = 0;
    };
    mutable std::mutex mutex_;
    std::map<std::pair<std::string, int>, uint64_t> requests_;
    std::map<std::string, Histogram> latency_;
    double audio_seconds_ = 0.0;
    double processing_seconds_ = 0.0;
};

// The chat model's generation service: queue, running sequences, requests, tokens (prompt,
// cached, generated), its KV cache (blocks, prefix hits, evictions).
std::string generation_metrics_text(const GenerationServiceStats& s);

// An accelerator's memory as its driver reports it (/metrics, /v1/status, `parlance top`).
struct DeviceMemory {
    std::string name;  // "CUDA0"
    size_t free = 0, total = 0;
};
// parlance_device_memory_bytes{device, state="free"|"total"} of each (nothing for none).
std::string device_memory_text(const std::vector<DeviceMemory>& devices);
// parlance_gpu_graphs_total{event="captured"|"reset"|"reused"}: what ggml-cuda did with the steps'
// CUDA graphs (core/ggml_messages.h); nothing without an accelerator.
std::string gpu_graph_text(const std::vector<DeviceMemory>& devices, const GpuGraphCounts& counts);

// Resident set size of this process in bytes (from /proc/self/statm), 0 if unknown.
size_t resident_bytes();

}  // namespace parlance::server
