// Op profiling: with PARLANCE_PROFILE_OPS=1 every graph Backend::compute runs is computed node by
// node, each node's wall time (its kernel launches and a device synchronisation) added to a table
// keyed by the op and its operands' shapes; the table's heaviest rows go to stderr when the
// process exits (and on OpProfile::report). It answers "which kernels does this model's pass spend
// its time in" on any backend, without a vendor profiler (the GPU machine has none). Each node
// costs a synchronisation (~10 us on CUDA), so totals over-count small ops: read the large rows.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>

#include <ggml-backend.h>
#include <ggml.h>

namespace parlance {

class OpProfile {
public:
    // The process's profile when PARLANCE_PROFILE_OPS is set (not "0"), else nullptr.
    static OpProfile* active();

    // Profiles one ggml_backend_sched_graph_compute on `sched` while it lives (graphs on other
    // threads wait: one callback per scheduler, one table).
    class Scope {
    public:
        Scope(OpProfile& profile, ggml_backend_sched_t sched);
        ~Scope();
        Scope(const Scope&) = delete;
        Scope& operator=(const Scope&) = delete;

    private:
        OpProfile& profile_;
        ggml_backend_sched_t sched_;
        std::unique_lock<std::mutex> lock_;
    };

    // The `rows` heaviest rows, heaviest first, and the total.
    void report(std::FILE* out, int rows = 40);

private:
    struct Row {
        int64_t calls = 0;
        double seconds = 0.0;
    };
    static bool observe(ggml_tensor* t, bool ask, void* self);
    static std::string key_of(const ggml_tensor* t);

    std::mutex mutex_;
    std::map<std::string, Row> rows_;
    int64_t graphs_ = 0;
    int64_t started_ns_ = 0;  // the current node's start
};

}  // namespace parlance
