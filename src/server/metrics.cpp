// Prometheus metrics (see metrics.h).
#include "server/metrics.h"

#include <unistd.h>

#include <cstdio>
#include <sstream>

namespace parlance::server {
namespace {
const std::vector<double> kBuckets = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
}

size_t resident_bytes() {
    std::FILE* f = std::fopen("/proc/self/statm", "r");
    if (!f) return 0;
    unsigned long size = 0, resident = 0;
    int n = std::fscanf(f, "%lu %lu", &size, &resident);
    std::fclose(f);
    return n == 2 ? resident * static_cast<size_t>(sysconf(_SC_PAGESIZE)) : 0;
}

void Metrics::observe(const std::string& route, int status, double seconds, double audio_seconds) {
    std::lock_guard<std::mutex> lock(mutex_);
    requests_[{route, status}]++;
    Histogram& h = latency_[route];
    if (h.buckets.empty()) h.buckets.assign(kBuckets.size(), 0);
    for (size_t i = 0; i < kBuckets.size(); ++i)
        if (seconds <= kBuckets[i]) h.buckets[i]++;
    h.sum += seconds;
    h.count++;
    if (audio_seconds > 0) {
        audio_seconds_ += audio_seconds;
        processing_seconds_ += seconds;
    }
}

std::string Metrics::render(const EngineStats* e, double uptime) const {
    std::ostringstream os;
    std::lock_guard<std::mutex> lock(mutex_);
    os << "# HELP parlance_requests_total HTTP requests by route and status.\n"
          "# TYPE parlance_requests_total counter\n";
    for (const auto& [key, n] : requests_)
        os << "parlance_requests_total{route=\"" << key.first << "\",status=\"" << key.second << "\"} " << n << "\n";
    os << "# HELP parlance_request_duration_seconds Request latency.\n"
          "# TYPE parlance_request_duration_seconds histogram\n";
    for (const auto& [route, h] : latency_) {
        for (size_t i = 0; i < kBuckets.size(); ++i)
            os << "parlance_request_duration_seconds_bucket{route=\"" << route << "\",le=\"" << kBuckets[i] << "\"} "
               << h.buckets[i] << "\n";
        os << "parlance_request_duration_seconds_bucket{route=\"" << route << "\",le=\"+Inf\"} " << h.count << "\n";
        os << "parlance_request_duration_seconds_sum{route=\"" << route << "\"} " << h.sum << "\n";
        os << "parlance_request_duration_seconds_count{route=\"" << route << "\"} " << h.count << "\n";
    }
    os << "# HELP parlance_audio_seconds_total Seconds of audio transcribed.\n"
          "# TYPE parlance_audio_seconds_total counter\n"
       << "parlance_audio_seconds_total " << audio_seconds_ << "\n";
    os << "# HELP parlance_real_time_factor Processing time over audio time, all requests so far.\n"
          "# TYPE parlance_real_time_factor gauge\n"
       << "parlance_real_time_factor " << (audio_seconds_ > 0 ? processing_seconds_ / audio_seconds_ : 0.0) << "\n";
    if (e) {
        os << "# TYPE parlance_queue_depth gauge\nparlance_queue_depth " << e->queued << "\n";
        os << "# TYPE parlance_active_requests gauge\nparlance_active_requests " << e->active << "\n";
        os << "# TYPE parlance_free_cache_slots gauge\nparlance_free_cache_slots " << e->free_slots << "\n";
        os << "# HELP parlance_decode_tokens_total Tokens decoded: of finished decodes, a beam search counting its "
              "best hypothesis only.\n"
              "# TYPE parlance_decode_tokens_total counter\nparlance_decode_tokens_total "
           << e->decode_tokens << "\n";
        os << "# TYPE parlance_decoder_steps_total counter\nparlance_decoder_steps_total " << e->decoder_steps << "\n";
        os << "# TYPE parlance_requests_cancelled_total counter\nparlance_requests_cancelled_total " << e->cancelled
           << "\n";
        os << "# HELP parlance_decode_tokens_per_second parlance_decode_tokens_total over the engine's busy seconds.\n"
              "# TYPE parlance_decode_tokens_per_second gauge\nparlance_decode_tokens_per_second "
           << (e->busy_seconds > 0 ? e->decode_tokens / e->busy_seconds : 0.0) << "\n";
        os << "# HELP parlance_engine_seconds_total Engine thread seconds: busy (all of a step), and of it the "
              "encoder's passes (features included; on a thread of their own where the encoder has its own "
              "stream, not part of busy), their features (log-mel), the decoder's forward passes and of them the backend's compute (launching "
              "the graph and waiting for the device; the rest is the host's).\n"
              "# TYPE parlance_engine_seconds_total counter\n"
           << "parlance_engine_seconds_total{phase=\"busy\"} " << e->busy_seconds << "\n"
           << "parlance_engine_seconds_total{phase=\"encoder\"} " << e->encoder_seconds << "\n"
           << "parlance_engine_seconds_total{phase=\"features\"} " << e->features_seconds << "\n"
           << "parlance_engine_seconds_total{phase=\"decoder_forward\"} " << e->decoder_forward_seconds << "\n"
           << "parlance_engine_seconds_total{phase=\"decoder_compute\"} " << e->decoder_compute_seconds << "\n";
        os << "# TYPE parlance_encoded_pieces_total counter\nparlance_encoded_pieces_total " << e->encoded_pieces
           << "\n";
        const KvCacheStats& kv = e->kv;
        const int free_blocks = kv.total_blocks - kv.used_blocks - kv.cached_blocks;
        os << "# HELP parlance_kv_cache_capacity_bytes Bytes of the decoder's paged KV cache (--kv-cache-mb).\n"
              "# TYPE parlance_kv_cache_capacity_bytes gauge\nparlance_kv_cache_capacity_bytes "
           << e->kv_capacity_bytes << "\n";
        os << "# HELP parlance_kv_cache_blocks KV cache blocks by state: used (held by sequences), cached "
              "(a reusable prompt prefix), free.\n"
              "# TYPE parlance_kv_cache_blocks gauge\n"
           << "parlance_kv_cache_blocks{state=\"used\"} " << kv.used_blocks << "\n"
           << "parlance_kv_cache_blocks{state=\"cached\"} " << kv.cached_blocks << "\n"
           << "parlance_kv_cache_blocks{state=\"free\"} " << free_blocks << "\n";
        os << "# HELP parlance_kv_cache_usage_ratio Blocks held by sequences over all blocks.\n"
              "# TYPE parlance_kv_cache_usage_ratio gauge\nparlance_kv_cache_usage_ratio "
           << (kv.total_blocks > 0 ? static_cast<double>(kv.used_blocks) / kv.total_blocks : 0.0) << "\n";
        os << "# HELP parlance_kv_cache_reserved_blocks Blocks held back for admitted requests' worst case.\n"
              "# TYPE parlance_kv_cache_reserved_blocks gauge\nparlance_kv_cache_reserved_blocks "
           << e->kv_reserved_blocks << "\n";
        os << "# HELP parlance_kv_prefix_query_tokens_total Prompt tokens looked up in the prefix cache.\n"
              "# TYPE parlance_kv_prefix_query_tokens_total counter\nparlance_kv_prefix_query_tokens_total "
           << kv.prefix_queries << "\n";
        os << "# HELP parlance_kv_prefix_hit_tokens_total Prompt tokens found in the prefix cache.\n"
              "# TYPE parlance_kv_prefix_hit_tokens_total counter\nparlance_kv_prefix_hit_tokens_total "
           << kv.prefix_hits << "\n";
        os << "# HELP parlance_kv_cache_evictions_total Cached prefix blocks reused for other tokens.\n"
              "# TYPE parlance_kv_cache_evictions_total counter\nparlance_kv_cache_evictions_total "
           << kv.evictions << "\n";
    }
    os << "# TYPE parlance_resident_memory_bytes gauge\nparlance_resident_memory_bytes " << resident_bytes() << "\n";
    os << "# TYPE parlance_uptime_seconds gauge\nparlance_uptime_seconds " << uptime << "\n";
    return os.str();
}

std::string device_memory_text(const std::vector<DeviceMemory>& devices) {
    if (devices.empty()) return "";
    std::ostringstream os;
    os << "# HELP parlance_device_memory_bytes Accelerator memory as its driver reports it: free, total.\n"
          "# TYPE parlance_device_memory_bytes gauge\n";
    for (const DeviceMemory& d : devices)
        os << "parlance_device_memory_bytes{device=\"" << d.name << "\",state=\"free\"} " << d.free << "\n"
           << "parlance_device_memory_bytes{device=\"" << d.name << "\",state=\"total\"} " << d.total << "\n";
    return os.str();
}

std::string gpu_graph_text(const std::vector<DeviceMemory>& devices, const GpuGraphCounts& counts) {
    if (devices.empty()) return "";
    std::ostringstream os;
    os << "# HELP parlance_gpu_graphs_total What ggml-cuda did with the steps' CUDA graphs: captured (a graph "
          "warmed up and recorded for replay), reset (a kept graph changed, so launched kernel by kernel until "
          "stable), reused (replayed right after itself).\n"
          "# TYPE parlance_gpu_graphs_total counter\n"
       << "parlance_gpu_graphs_total{event=\"captured\"} " << counts.captured << "\n"
       << "parlance_gpu_graphs_total{event=\"reset\"} " << counts.reset << "\n"
       << "parlance_gpu_graphs_total{event=\"reused\"} " << counts.reused << "\n";
    return os.str();
}

std::string generation_metrics_text(const GenerationServiceStats& s) {
    std::ostringstream os;
    auto gauge = [&](const char* name, const char* help, auto value) {
        os << "# HELP " << name << " " << help << "\n# TYPE " << name << " gauge\n" << name << " " << value << "\n";
    };
    auto counter = [&](const char* name, const char* help, auto value) {
        os << "# HELP " << name << " " << help << "\n# TYPE " << name << " counter\n" << name << " " << value << "\n";
    };
    gauge("parlance_chat_queue", "Chat requests waiting to join the batch.", s.queued);
    gauge("parlance_chat_running_sequences", "Chat sequences in the engine (n > 1 counts each choice).", s.running);
    os << "# HELP parlance_chat_requests_total Chat requests that ended, by outcome.\n"
          "# TYPE parlance_chat_requests_total counter\n"
       << "parlance_chat_requests_total{outcome=\"completed\"} " << s.completed << "\n"
       << "parlance_chat_requests_total{outcome=\"cancelled\"} " << s.cancelled << "\n"
       << "parlance_chat_requests_total{outcome=\"failed\"} " << s.failed << "\n";
    counter("parlance_chat_prompt_tokens_total", "Prompt tokens of finished chat sequences.", s.prompt_tokens);
    counter("parlance_chat_cached_prompt_tokens_total", "Prompt tokens whose K/V came from the prefix cache.",
            s.cached_prompt_tokens);
    counter("parlance_chat_generated_tokens_total", "Tokens generated by finished chat sequences.", s.generated_tokens);
    counter("parlance_chat_steps_total", "Batched model steps of the chat engine.", s.steps);
    os << "# HELP parlance_chat_step_tokens_total Tokens of the chat engine's steps: sampled (per step: the "
          "batch width) and computed (prompt chunks included).\n"
          "# TYPE parlance_chat_step_tokens_total counter\n"
       << "parlance_chat_step_tokens_total{kind=\"sampled\"} " << s.step_tokens_sampled << "\n"
       << "parlance_chat_step_tokens_total{kind=\"computed\"} " << s.step_tokens_computed << "\n";
    counter("parlance_chat_busy_seconds_total", "Seconds the chat engine thread spent in steps.", s.busy_seconds);
    os << "# HELP parlance_chat_draft_tokens_total Speculative draft tokens (prompt lookup): proposed, and "
          "accepted (kept because decoding would have produced them).\n"
          "# TYPE parlance_chat_draft_tokens_total counter\n"
       << "parlance_chat_draft_tokens_total{outcome=\"proposed\"} " << s.draft_tokens << "\n"
       << "parlance_chat_draft_tokens_total{outcome=\"accepted\"} " << s.draft_accepted << "\n";
    gauge("parlance_chat_kv_cache_capacity_bytes", "Bytes of the chat model's paged KV cache.", s.kv_bytes);
    os << "# HELP parlance_chat_kv_cache_blocks Chat KV cache blocks by state.\n"
          "# TYPE parlance_chat_kv_cache_blocks gauge\n"
       << "parlance_chat_kv_cache_blocks{state=\"used\"} " << s.kv.used_blocks << "\n"
       << "parlance_chat_kv_cache_blocks{state=\"cached\"} " << s.kv.cached_blocks << "\n"
       << "parlance_chat_kv_cache_blocks{state=\"free\"} " << (s.kv.total_blocks - s.kv.used_blocks - s.kv.cached_blocks)
       << "\n";
    counter("parlance_chat_prefix_hit_tokens_total", "Prompt tokens served from cached blocks.", s.kv.prefix_hits);
    counter("parlance_chat_kv_evictions_total", "Cached blocks evicted for room.", s.kv.evictions);
    return os.str();
}

}  // namespace parlance::server
