// Op tracing, for comparing two backends op by op (issue 19's method, as llama.cpp's
// test-backend-ops compares kernels): with PARLANCE_TRACE_OPS=DIR set, every graph that
// Backend::compute runs writes each computed node's output to DIR/graph-NNNNN.trace, in the order
// the graphs ran. Run the same command on two devices into two directories and compare them with
// tools/op_trace/compare.py, which ranks the ops by how much they add to the difference.
//
// A record: u32 index, i32 source record indices [4] (-1: weights or none, -2: data not recorded,
// such as a KV cache over kMaxLeafValues),
// char name[64], char op[32], i64 ne[4], u64 count, then count f32 values (f16/bf16 converted;
// count 0 for non-contiguous tensors and other types), little-endian. Views and cache writes
// (set_rows: the node is the whole cache) get a record without values. Data a graph reads that it
// did not compute and that are not weights (uploaded inputs: the previous graph's results, audio
// embeddings) are recorded once, before their first reader, with an index past the nodes'.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_map>

#include <ggml-backend.h>
#include <ggml.h>

namespace parlance {

// A node whose output has slots no later node reads (a layout sized for the most it may hold, such
// as the CPU attention's partial results) is named with this prefix: the trace records it without
// values, since its unused slots hold whatever the buffer held before (two runs may differ there).
inline constexpr const char* kPartlyWrittenPrefix = "partly-written:";

class OpTrace {
public:
    // The process's trace when PARLANCE_TRACE_OPS names a directory (created if missing), else
    // nullptr. Tracing computes node by node and copies every output to the host: slow.
    static OpTrace* active();

    // Traces one ggml_backend_sched_graph_compute of `graph` on `sched` while it lives: engines on
    // other threads (a server's models, its VAD) wait for the trace, so each graph's records stay
    // together, and the callback is removed however the compute ends.
    class Scope {
    public:
        Scope(OpTrace& trace, ggml_cgraph* graph, ggml_backend_sched_t sched);
        ~Scope();
        Scope(const Scope&) = delete;
        Scope& operator=(const Scope&) = delete;

    private:
        OpTrace& trace_;
        std::unique_lock<std::mutex> lock_;
    };
    // ggml_backend_sched_eval_callback: asks for every node, writes each once computed.
    static bool observe(ggml_tensor* t, bool ask, void* self);

private:
    static constexpr int64_t kMaxLeafValues = int64_t(1) << 22;  // larger inputs (a KV cache): not recorded

    explicit OpTrace(std::string dir) : dir_(std::move(dir)) {}
    void begin(ggml_cgraph* graph, ggml_backend_sched_t sched);
    void end();
    void write(ggml_tensor* t, bool with_values);
    // The record index a node's source reads (-1: weights, -2: not recorded).
    int32_t source_of(const ggml_tensor* src);
    void write_record(ggml_tensor* t, uint32_t index, const std::array<int32_t, 4>& sources, bool with_values);

    std::mutex mutex_;
    std::string dir_;
    bool failed_ = false;  // a record could not be written: the trace file is incomplete
    int graphs_ = 0;
    std::FILE* file_ = nullptr;
    ggml_backend_sched_t sched_ = nullptr;
    std::unordered_map<const ggml_tensor*, int> index_;           // node -> its index in the graph
    std::unordered_map<const ggml_tensor*, int32_t> leaves_;      // host data read by the graph -> record index
    std::unordered_map<const ggml_tensor*, int32_t> last_write_;  // tensor -> set_rows node that wrote into it
};

}  // namespace parlance
