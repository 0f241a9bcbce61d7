// The compute device: one ggml backend (CPU, CUDA or Metal) plus the CPU (and BLAS) backends it
// falls back to, and the scheduler that places a graph's ops on them. Created once per model
// runner; used by one thread at a time (the engine thread that owns it).
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include <ggml-backend.h>
#include <ggml.h>

namespace parlance {

struct GraphContext;

// Whether a tensor's data lives in the CPU device's memory (not a GPU's, not Metal's shared
// buffers): the CPU-only custom ops (weight_product.h, cpu_attention.h) read only such tensors.
bool in_cpu_memory(const ggml_tensor* t);
// Whether buffers of this type are the CPU device's memory (in_cpu_memory's test, before allocation).
bool cpu_buffer_type(ggml_backend_buffer_type_t type);

// Asks the kernel to back a CPU buffer with 2 MiB pages (Linux's transparent huge pages, which
// Debian grants only where madvise asks; a no-op elsewhere and for device buffers). Call it before
// the buffer is written. Weights and KV caches are read in streams that change 4 KiB page every few
// rows (a KV cell's row is one page): every step walks the page tables again, and the hardware
// prefetcher stops at each page's end. PARLANCE_HUGE_PAGES=off keeps 4 KiB pages (to measure the
// difference, or where memory must follow use more finely). BENCHMARKS.md ("Huge pages").
void prefer_huge_pages(ggml_backend_buffer_t buffer);
void prefer_huge_pages(void* base, size_t bytes);

struct BackendOptions {
    std::string device = "cpu";  // "cpu", "cuda", "metal" (the latter two only when built with them)
    int threads = 0;             // CPU threads; 0 = hardware concurrency (capped at 8)
    bool use_blas = true;        // route large f32/f16 products through the BLAS backend if present
    // CUDA: let cuBLAS run f32 products in TF32 (10-bit mantissa; ggml-cuda asks for it). Off by
    // default: TF32 put the decoder's multi-token steps ~1e-3 off transformers and flipped tokens
    // (docs/cuda.md, issue 19); off means NVIDIA_TF32_OVERRIDE=0 is set before the device starts.
    bool allow_tf32 = false;
};

class Backend {
public:
    explicit Backend(const BackendOptions& options);
    ~Backend();
    // Another instance on the same device, with its own stream, scheduler and compute buffers, for
    // graphs that run on another thread beside this one's (a speech model's encoder passes beside
    // the decoder's steps): tensors in either's buffers are read by both. CUDA only (null
    // elsewhere: the CPU's cores are this instance's threads already; Metal's queues untried),
    // unless `any_device` (tests exercise the threads on the CPU).
    std::unique_ptr<Backend> companion(bool any_device = false) const;
    Backend(const Backend&) = delete;
    Backend& operator=(const Backend&) = delete;

    // Where weights and caches live (the accelerator if there is one, else the CPU).
    ggml_backend_t primary() const { return primary_; }
    ggml_backend_buffer_type_t primary_buffer_type() const;
    const std::string& device_name() const { return device_name_; }
    const std::string& device_description() const { return device_description_; }
    int threads() const { return threads_; }
    void set_threads(int threads);
    // The primary device's free and total memory in bytes, as its driver reports them now (the
    // CPU: the system's).
    struct Memory {
        size_t free = 0, total = 0;
    };
    Memory device_memory() const;

    // Allocates the graph's intermediate tensors on the right backends. Call, then set the
    // input tensors' data, then compute(). Throws Error(Internal) if allocation fails.
    // batch_invariant: keep every product on the primary backend, so a row's result does not
    // depend on how many rows share the graph (BLAS takes only products of >= 32 rows, and its
    // summation order differs): decoder steps use it so batched requests equal solo ones.
    void alloc_graph(ggml_cgraph* graph, bool batch_invariant = false);
    // The same for a graph kept from one step to the next (a model's decode graph, StepShape):
    // allocated only when it has not been yet or another allocation came since (each makes new
    // intermediates; the kept graph's may have been freed), and then first put back as it was
    // built — its own tensors unplaced, its nodes' sources restored (ggml's scheduler rewrites a
    // node's source that lives on another backend to a copy of the split it made, which a later
    // graph's split reuses). A failed allocation leaves the graph to be allocated again.
    void alloc_graph(GraphContext& kept, bool batch_invariant = false);
    // Which allocation the intermediate tensors have: every alloc_graph makes a new one, and a
    // graph allocated before it must be allocated again before it computes.
    uint64_t allocation() const { return allocation_; }
    // Runs the graph allocated by alloc_graph; throws Error(Internal) on failure.
    void compute(ggml_cgraph* graph);
    // Seconds spent in compute() so far: on a GPU, launching the graph and waiting for it (the
    // rest of a forward pass is the host's: building, allocating, inputs and outputs).
    double compute_seconds() const { return compute_seconds_; }

    // Whether the build links the named device kind ("cpu", "cuda", "metal").
    static bool available(const std::string& device);
    // Names of the devices ggml registered, for `parlance info --devices` and logs.
    static std::vector<std::string> device_names();

private:
    static constexpr size_t kInitialSchedulerNodes = 8192;
    void make_schedulers(size_t nodes);

    BackendOptions options_;
    std::vector<ggml_backend_t> backends_;  // primary first, CPU last
    ggml_backend_t primary_ = nullptr;
    ggml_backend_t cpu_ = nullptr;
    ggml_backend_sched_t sched_ = nullptr;            // all backends (BLAS first if present)
    ggml_backend_sched_t sched_invariant_ = nullptr;  // without BLAS; == sched_ when no BLAS
    ggml_backend_sched_t current_ = nullptr;          // the one the last alloc_graph used
    size_t sched_nodes_ = 0;                          // graph size the schedulers are made for
    uint64_t allocation_ = 0;
    double compute_seconds_ = 0.0;
    std::string device_name_;
    std::string device_description_;
    int threads_ = 1;
};

// The largest graph a model builds (a step's nodes grow with layers and distinct audio windows, not
// with hypotheses), and the size of a graph's tensor metadata for ggml_init of a no_alloc context.
// Graphs are created with the capacity they need (graph_capacity): ggml's allocators clear tables
// of the graph's capacity on every step, so an oversized graph costs time.
constexpr size_t kMaxGraphNodes = 65536;
size_t graph_context_size(size_t max_nodes = kMaxGraphNodes);
// A capacity for an estimated node count: rounded up to a power of two, at least 1024. Throws
// Error(TooLarge) past kMaxGraphNodes (on a GPU a step's attention grows with its sequences: a
// clear refusal instead of ggml's abort).
size_t graph_capacity(size_t estimated_nodes);

// A no-alloc ggml context over a caller's metadata buffer with a graph of the capacity
// `estimated_nodes` needs; freed when it goes out of scope. A buffer too small for that capacity
// is grown first (a graph_context_size() buffer never is).
struct GraphContext {
    GraphContext(std::vector<uint8_t>& buffer, size_t estimated_nodes);
    ~GraphContext();
    GraphContext(const GraphContext&) = delete;
    GraphContext& operator=(const GraphContext&) = delete;
    ggml_context* ctx = nullptr;
    ggml_cgraph* graph = nullptr;

private:
    friend class Backend;  // alloc_graph(GraphContext&): a kept graph's placing and restoring
    // Notes every node's sources as built (at the graph's first allocation), for unplace().
    void keep_sources();
    // Forgets where the last allocation put the graph's own tensors (weights and caches live in
    // other contexts and keep theirs), so that the next allocation places them again: ggml's
    // allocator leaves a tensor that has data where it is, and another graph allocated since may
    // have grown the compute buffer into new memory and freed the old. The nodes' sources go back
    // as keep_sources() noted them.
    void unplace();
    std::vector<std::array<ggml_tensor*, GGML_MAX_SRC>> sources_;  // per node, as built
    bool sources_kept_ = false;
    uint64_t allocation_ = 0;  // the Backend::allocation() it was placed at (0: not placed)
};

}  // namespace parlance
