// Backend selection and the scheduler (see backend.h).
#include "core/backend.h"

#include <cstdint>
#include <cstdlib>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

#include <ggml-cpu.h>

#include "core/error.h"
#include "core/ggml_messages.h"
#include "core/op_profile.h"
#include "core/op_trace.h"
#include "core/runtime_settings.h"

namespace parlance {
namespace {

ggml_backend_dev_t find_device(const std::string& device) {
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
        ggml_backend_dev_t dev = ggml_backend_dev_get(i);
        std::string name = ggml_backend_dev_name(dev);
        std::string lower;
        for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        auto type = ggml_backend_dev_type(dev);
        if (device == "cpu" && type == GGML_BACKEND_DEVICE_TYPE_CPU) return dev;
        if ((device == "cuda" || device == "metal") && type == GGML_BACKEND_DEVICE_TYPE_GPU &&
            lower.find(device == "cuda" ? "cuda" : "metal") != std::string::npos)
            return dev;
    }
    return nullptr;
}

}  // namespace

size_t graph_capacity(size_t estimated_nodes) {
    if (estimated_nodes > kMaxGraphNodes)
        throw Error(ErrorKind::TooLarge, "a step of about " + std::to_string(estimated_nodes) +
                                             " graph nodes is more than a graph holds (" +
                                             std::to_string(kMaxGraphNodes) + "): run fewer sequences at once");
    size_t n = 1024;
    while (n < estimated_nodes && n < kMaxGraphNodes) n *= 2;
    return n;
}

size_t graph_context_size(size_t max_nodes) {
    return ggml_tensor_overhead() * max_nodes + ggml_graph_overhead_custom(max_nodes, false);
}

GraphContext::GraphContext(std::vector<uint8_t>& buffer, size_t estimated_nodes) {
    const size_t capacity = graph_capacity(estimated_nodes);  // throws before a context exists
    // Room for the graph and twice its capacity in tensors (its nodes, views included, and its
    // leaves: inputs). A graph_context_size() buffer, which callers of the largest graphs hold,
    // is taken as it is.
    const size_t need = std::min(ggml_tensor_overhead() * 2 * capacity + ggml_graph_overhead_custom(capacity, false),
                                 graph_context_size());
    if (buffer.size() < need) buffer.resize(need);
    ggml_init_params p{buffer.size(), buffer.data(), true};
    ctx = ggml_init(p);
    graph = ggml_new_graph_custom(ctx, capacity, false);
}

GraphContext::~GraphContext() {
    ggml_free(ctx);
}

void GraphContext::keep_sources() {
    sources_kept_ = true;
    sources_.resize(static_cast<size_t>(ggml_graph_n_nodes(graph)));
    for (int i = 0; i < ggml_graph_n_nodes(graph); ++i)
        std::copy_n(ggml_graph_node(graph, i)->src, GGML_MAX_SRC, sources_[static_cast<size_t>(i)].begin());
}

void GraphContext::unplace() {
    for (ggml_tensor* t = ggml_get_first_tensor(ctx); t != nullptr; t = ggml_get_next_tensor(ctx, t)) {
        t->data = nullptr;
        t->buffer = nullptr;
    }
    for (size_t i = 0; i < sources_.size(); ++i)
        std::copy(sources_[i].begin(), sources_[i].end(), ggml_graph_node(graph, static_cast<int>(i))->src);
}

bool in_cpu_memory(const ggml_tensor* t) {
    const ggml_tensor* base = t->view_src ? t->view_src : t;
    if (base->buffer == nullptr) return false;
    return cpu_buffer_type(ggml_backend_buffer_get_type(base->buffer));
}

bool cpu_buffer_type(ggml_backend_buffer_type_t type) {
    ggml_backend_dev_t dev = ggml_backend_buft_get_device(type);
    // ggml's plain CPU buffer type has no device; every accelerator's has its own.
    return ggml_backend_buft_is_host(type) &&
           (dev == nullptr || ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_CPU);
}

void prefer_huge_pages(void* base, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (!runtime_settings().huge_pages) return;
    constexpr uintptr_t kHuge = uintptr_t{2} << 20;
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(base) + kHuge - 1) & ~(kHuge - 1);
    const uintptr_t end = (reinterpret_cast<uintptr_t>(base) + bytes) & ~(kHuge - 1);
    // Advice only: a kernel without THP refuses it, and the buffer works the same.
    if (end > begin) (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
    (void)base, (void)bytes;
#endif
}

void prefer_huge_pages(ggml_backend_buffer_t buffer) {
    if (buffer && cpu_buffer_type(ggml_backend_buffer_get_type(buffer)))
        prefer_huge_pages(ggml_backend_buffer_get_base(buffer), ggml_backend_buffer_get_size(buffer));
}

bool Backend::available(const std::string& device) {
    return find_device(device) != nullptr;
}

std::vector<std::string> Backend::device_names() {
    std::vector<std::string> names;
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
        ggml_backend_dev_t dev = ggml_backend_dev_get(i);
        names.push_back(std::string(ggml_backend_dev_name(dev)) + " (" + ggml_backend_dev_description(dev) + ")");
    }
    return names;
}

Backend::Backend(const BackendOptions& options) : options_(options) {
    install_ggml_messages();
    if (options.device != "cpu" && options.device != "cuda" && options.device != "metal")
        throw Error(ErrorKind::InvalidArgument, "unknown device '" + options.device + "' (cpu|cuda|metal)");
    if (options.device == "cuda" && !options.allow_tf32) {
        // Read by cuBLAS when it creates its handles (ggml-cuda does so on the first product), so
        // it must be in the environment before then; an explicit setting by the user wins.
        ::setenv("NVIDIA_TF32_OVERRIDE", "0", /*overwrite=*/0);
    }
    ggml_backend_dev_t dev = find_device(options.device);
    if (dev == nullptr)
        throw Error(ErrorKind::Unsupported, "device '" + options.device +
                                                "' is not available in this build (rebuild with "
                                                "scripts/setup.sh --cuda and -DPARLANCE_CUDA=ON)");
    primary_ = ggml_backend_dev_init(dev, nullptr);
    if (primary_ == nullptr) throw Error(ErrorKind::Io, "could not initialise device '" + options.device + "'");
    device_name_ = ggml_backend_dev_name(dev);
    device_description_ = ggml_backend_dev_description(dev);
    backends_.push_back(primary_);

    if (options.device == "cpu") {
        cpu_ = primary_;
        if (options.use_blas) {
            // BLAS goes first so the scheduler offers it the large products it supports.
            for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
                ggml_backend_dev_t d = ggml_backend_dev_get(i);
                if (std::string(ggml_backend_dev_name(d)) == "BLAS") {
                    if (ggml_backend_t blas = ggml_backend_dev_init(d, nullptr))
                        backends_.insert(backends_.begin(), blas);
                }
            }
        }
    } else {
        cpu_ = ggml_backend_init_by_type(GGML_BACKEND_DEVICE_TYPE_CPU, nullptr);
        backends_.push_back(cpu_);
    }
    int threads =
        options.threads > 0 ? options.threads : std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 8);
    set_threads(threads);

    make_schedulers(kInitialSchedulerNodes);
}

std::unique_ptr<Backend> Backend::companion(bool any_device) const {
    if (!any_device && options_.device != "cuda") return nullptr;
    BackendOptions o = options_;
    o.threads = threads_;
    return std::make_unique<Backend>(o);
}

void Backend::make_schedulers(size_t nodes) {
    if (sched_invariant_ && sched_invariant_ != sched_) ggml_backend_sched_free(sched_invariant_);
    if (sched_) ggml_backend_sched_free(sched_);
    sched_ = sched_invariant_ = current_ = nullptr;
    sched_nodes_ = nodes;
    sched_ = ggml_backend_sched_new(backends_.data(), nullptr, static_cast<int>(backends_.size()), nodes, false, true);
    if (sched_ == nullptr) throw Error(ErrorKind::Internal, "ggml_backend_sched_new failed");
    std::vector<ggml_backend_t> no_blas;
    for (ggml_backend_t b : backends_)
        if (std::string(ggml_backend_name(b)) != "BLAS") no_blas.push_back(b);
    sched_invariant_ =
        no_blas.size() == backends_.size()
            ? sched_
            : ggml_backend_sched_new(no_blas.data(), nullptr, static_cast<int>(no_blas.size()), nodes, false, true);
    if (sched_invariant_ == nullptr) throw Error(ErrorKind::Internal, "ggml_backend_sched_new failed");
}

Backend::~Backend() {
    if (sched_invariant_ && sched_invariant_ != sched_) ggml_backend_sched_free(sched_invariant_);
    if (sched_) ggml_backend_sched_free(sched_);
    for (ggml_backend_t b : backends_) ggml_backend_free(b);
}

ggml_backend_buffer_type_t Backend::primary_buffer_type() const {
    return ggml_backend_get_default_buffer_type(primary_);
}

Backend::Memory Backend::device_memory() const {
    Memory m;
    if (ggml_backend_dev_t dev = ggml_backend_get_device(primary_)) ggml_backend_dev_memory(dev, &m.free, &m.total);
    return m;
}

void Backend::set_threads(int threads) {
    threads_ = std::max(1, threads);
    for (ggml_backend_t b : backends_) {
        ggml_backend_dev_t dev = ggml_backend_get_device(b);
        ggml_backend_reg_t reg = dev ? ggml_backend_dev_backend_reg(dev) : nullptr;
        if (!reg) continue;
        auto fn = reinterpret_cast<ggml_backend_set_n_threads_t>(
            ggml_backend_reg_get_proc_address(reg, "ggml_backend_set_n_threads"));
        if (fn) fn(b, threads_);
    }
}

void Backend::alloc_graph(ggml_cgraph* graph, bool batch_invariant) {
    // The schedulers' hash tables are sized for a graph and cleared on every reset, so they start
    // small and grow (rarely: a step with many distinct audio windows) to fit the graph at hand.
    // Room for the nodes and about as many leaves (weights, inputs).
    const size_t need = 2 * static_cast<size_t>(ggml_graph_n_nodes(graph)) + 4096;
    if (need > sched_nodes_) {
        size_t n = sched_nodes_;
        while (n < need) n *= 2;
        make_schedulers(n);
    }
    current_ = batch_invariant ? sched_invariant_ : sched_;
    ++allocation_;
    ggml_backend_sched_reset(current_);
    if (!ggml_backend_sched_alloc_graph(current_, graph))
        throw Error(ErrorKind::Internal, "could not allocate the compute graph");
}

void Backend::alloc_graph(GraphContext& kept, bool batch_invariant) {
    if (kept.allocation_ != 0 && kept.allocation_ == allocation_) return;  // still where it was placed
    if (!kept.sources_kept_) kept.keep_sources();                          // as built: never allocated
    kept.unplace();
    kept.allocation_ = 0;  // until the allocation succeeds
    alloc_graph(kept.graph, batch_invariant);
    kept.allocation_ = allocation_;
}

void Backend::compute(ggml_cgraph* graph) {
    if (current_ == nullptr) throw Error(ErrorKind::Internal, "graph computation failed: no graph allocated");
    std::optional<OpTrace::Scope> traced;
    std::optional<OpProfile::Scope> profiled;
    if (OpTrace* trace = OpTrace::active()) {
        traced.emplace(*trace, graph, current_);
    } else if (OpProfile* profile = OpProfile::active()) {
        profiled.emplace(*profile, current_);
    }
    const auto t0 = std::chrono::steady_clock::now();
    const ggml_status status = ggml_backend_sched_graph_compute(current_, graph);
    compute_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    traced.reset();
    profiled.reset();
    if (status != GGML_STATUS_SUCCESS) throw Error(ErrorKind::Internal, "graph computation failed");
}

}  // namespace parlance
