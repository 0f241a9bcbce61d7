// Device memory of the paged KV cache (see kv_storage.h).
#include "core/kv_storage.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <string>

#include <ggml-alloc.h>

#include "core/error.h"

namespace parlance {
namespace {

uint64_t next_id() {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

size_t KvSpec::bytes_per_token() const {
    return 2 * static_cast<size_t>(n_layers) * ggml_row_size(type, kv_dim);
}

KvStorage::KvStorage(const KvSpec& spec, int64_t n_cells, Backend& backend)
    : spec_(spec), n_cells_(n_cells), id_(next_id()), graph_buf_(graph_context_size(4096)) {
    if (spec.n_layers < 1 || spec.kv_dim < 1 || n_cells < 1)
        throw Error(ErrorKind::InvalidArgument, "a KV cache needs layers, width and cells");
    ggml_init_params p{ggml_tensor_overhead() * (2 * spec.n_layers + 2), nullptr, true};
    ctx_ = ggml_init(p);
    for (int l = 0; l < spec.n_layers; ++l) {
        // One cell more than asked: scratch_cell().
        k_.push_back(ggml_new_tensor_2d(ctx_, spec.type, spec.kv_dim, n_cells + 1));
        v_.push_back(ggml_new_tensor_2d(ctx_, spec.type, spec.kv_dim, n_cells + 1));
        ggml_format_name(k_.back(), "cache_k_l%d", l);
        ggml_format_name(v_.back(), "cache_v_l%d", l);
    }
    try {
        allocate(backend);
    } catch (...) {
        free_memory();
        throw;
    }
}

void KvStorage::allocate(Backend& backend) {
    const KvSpec& spec = spec_;
    const auto no_memory = [&] {
        return Error(ErrorKind::Io, "could not allocate " + std::to_string(spec.bytes_per_token() * n_cells_ >> 20) +
                                        " MiB for the KV cache");
    };
    ggml_backend_dev_t device = ggml_backend_get_device(backend.primary());
    if (device && ggml_backend_dev_type(device) == GGML_BACKEND_DEVICE_TYPE_CPU) {
        // Fresh anonymous pages: zero, and resident only once written, so the cache's memory
        // follows the cells tokens have reached, not the cap (a 512 MiB cap that one short
        // request uses costs that request's blocks).
        const size_t align = ggml_backend_buft_get_alignment(backend.primary_buffer_type());
        for (int l = 0; l < spec.n_layers; ++l)
            mapped_bytes_ += GGML_PAD(ggml_nbytes(k_[l]), align) + GGML_PAD(ggml_nbytes(v_[l]), align);
        void* p = mmap(nullptr, mapped_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) throw no_memory();
        mapped_ = p;
        prefer_huge_pages(mapped_, mapped_bytes_);
        buffer_ = ggml_backend_cpu_buffer_from_ptr(mapped_, mapped_bytes_);
        if (!buffer_) throw no_memory();
        ggml_tallocr places = ggml_tallocr_new(buffer_);
        for (int l = 0; l < spec.n_layers; ++l)
            for (ggml_tensor* t : {k_[l], v_[l]})
                if (ggml_tallocr_alloc(&places, t) != GGML_STATUS_SUCCESS) throw no_memory();
        return;
    }
    buffer_ = ggml_backend_alloc_ctx_tensors(ctx_, backend.primary());
    if (!buffer_) throw no_memory();
    // Cleared: padding cells are gathered (with weight 0), so they must hold finite values.
    ggml_backend_buffer_clear(buffer_, 0);
}

KvStorage::~KvStorage() {
    free_memory();
}

void KvStorage::free_memory() {
    if (buffer_) ggml_backend_buffer_free(buffer_);
    if (mapped_) munmap(mapped_, mapped_bytes_);
    if (ctx_) ggml_free(ctx_);
    buffer_ = nullptr;
    mapped_ = nullptr;
    ctx_ = nullptr;
}

size_t KvStorage::bytes() const {
    return buffer_ ? spec_.bytes_per_token() * static_cast<size_t>(n_cells_) : 0;
}

void KvStorage::copy_cells(std::span<const CellCopy> copies, Backend& backend) {
    if (copies.empty()) return;
    ggml_init_params p{graph_buf_.size(), graph_buf_.data(), true};
    ggml_context* ctx = ggml_init(p);
    ggml_cgraph* g = ggml_new_graph_custom(ctx, 4096, false);
    int nodes = 0;
    auto flush = [&]() {
        if (nodes == 0) return;
        backend.alloc_graph(g);
        backend.compute(g);
        ggml_free(ctx);
        ctx = ggml_init(p);
        g = ggml_new_graph_custom(ctx, 4096, false);
        nodes = 0;
    };
    for (const CellCopy& c : copies) {
        if (c.n <= 0) continue;
        if (c.from < 0 || c.to < 0 || c.from + c.n > n_cells_ || c.to + c.n > n_cells_)
            throw Error(ErrorKind::Internal, "KV copy outside the cache");
        for (int l = 0; l < spec_.n_layers; ++l) {
            for (ggml_tensor* t : {k_[l], v_[l]}) {
                ggml_tensor* src = ggml_view_2d(ctx, t, t->ne[0], c.n, t->nb[1], c.from * t->nb[1]);
                ggml_tensor* dst = ggml_view_2d(ctx, t, t->ne[0], c.n, t->nb[1], c.to * t->nb[1]);
                ggml_build_forward_expand(g, ggml_cpy(ctx, src, dst));
                nodes += 3;
            }
        }
        if (nodes > 3000) flush();
    }
    flush();
    ggml_free(ctx);
}

int kv_blocks_within(size_t bytes, const KvSpec& spec, int block_size, const std::string& what) {
    const size_t per_block = spec.bytes_per_token() * static_cast<size_t>(std::max(1, block_size));
    const size_t n = bytes / per_block;
    if (n < 1)
        throw Error(ErrorKind::InvalidArgument, what + " of " + std::to_string(bytes >> 20) +
                                                    " MiB holds no block of " + std::to_string(block_size) +
                                                    " tokens (" + std::to_string(per_block) + " bytes each)");
    return static_cast<int>(std::min<size_t>(n, std::numeric_limits<int32_t>::max() / std::max(1, block_size)));
}

void KvStorage::copy_blocks(std::span<const BlockCopy> copies, int block_size, Backend& backend) {
    if (copies.empty()) return;
    std::vector<CellCopy> cells;
    cells.reserve(copies.size());
    for (const BlockCopy& c : copies)
        cells.push_back(
            {static_cast<int64_t>(c.from) * block_size, static_cast<int64_t>(c.to) * block_size, c.n_tokens});
    copy_cells(cells, backend);
}

}  // namespace parlance
