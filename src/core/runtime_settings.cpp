// Process-wide settings (see runtime_settings.h).
#include "core/runtime_settings.h"

#include <atomic>

#include "core/error.h"

namespace parlance {
namespace {

RuntimeSettings& settings() {
    static RuntimeSettings s;
    return s;
}
std::atomic<bool> g_read{false};

}  // namespace

void set_runtime_settings(const RuntimeSettings& s) {
    if (g_read.load())
        throw Error(ErrorKind::Internal, "runtime settings are set before anything reads them (at start-up)");
    settings() = s;
}

const RuntimeSettings& runtime_settings() {
    // Read on hot paths (every product a graph builds): a load, and a store only the first time,
    // so threads do not write one shared cache line on each call.
    if (!g_read.load(std::memory_order_relaxed)) g_read.store(true);
    return settings();
}

}  // namespace parlance
