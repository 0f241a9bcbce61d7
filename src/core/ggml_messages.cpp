// ggml's log messages routed and counted (see ggml_messages.h).
#include "core/ggml_messages.h"

#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "ggml.h"

namespace parlance {
namespace {

std::atomic<uint64_t> g_captured{0}, g_reset{0}, g_reused{0};

// The level of the message a GGML_LOG_LEVEL_CONT piece continues (this thread's last).
thread_local ggml_log_level g_last_level = GGML_LOG_LEVEL_INFO;

void on_message(ggml_log_level level, const char* text, void*) {
    if (text == nullptr) return;
    if (level == GGML_LOG_LEVEL_CONT) {
        level = g_last_level;
    } else {
        g_last_level = level;
    }
    if (level == GGML_LOG_LEVEL_DEBUG) {
        count_ggml_message(text);
        return;
    }
    std::fputs(text, stderr);
    std::fflush(stderr);
}

}  // namespace

void count_ggml_message(const char* text) {
    // The wording of ggml-cuda's ggml_backend_cuda_graph_compute and ggml_cuda_graph_update_required
    // in the pinned bundle.
    if (std::strstr(text, "CUDA graph warmup complete")) {
        g_captured.fetch_add(1, std::memory_order_relaxed);
    } else if (std::strstr(text, "CUDA graph warmup reset")) {
        g_reset.fetch_add(1, std::memory_order_relaxed);
    } else if (std::strstr(text, "CUDA Graph id") && std::strstr(text, "reused")) {
        g_reused.fetch_add(1, std::memory_order_relaxed);
    }
}

void install_ggml_messages() {
    static std::once_flag once;
    std::call_once(once, [] { ggml_log_set(on_message, nullptr); });
}

GpuGraphCounts gpu_graph_counts() {
    return {g_captured.load(std::memory_order_relaxed), g_reset.load(std::memory_order_relaxed),
            g_reused.load(std::memory_order_relaxed)};
}

}  // namespace parlance
