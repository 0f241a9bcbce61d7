// The device memory of a paged KV cache: per layer one K and one V tensor of ne [kv_dim, n_cells + 1]
// (a cell per token: block b's cells are [b * block_size, (b + 1) * block_size)). Models write
// into and gather from it inside their step graphs (graph_ops.h paged_attention); the engine
// copies blocks (copy-on-write) with copy_cells. Not thread-safe: the engine thread owns it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <ggml-backend.h>
#include <ggml.h>

#include "core/backend.h"
#include "core/kv_cache_manager.h"

namespace parlance {

struct KvSpec {
    int n_layers = 0;
    int kv_dim = 0;                  // n_kv_heads * head_dim (K and V alike)
    ggml_type type = GGML_TYPE_F32;  // storage type of the cells
    // Bytes one token takes in every layer's K and V.
    size_t bytes_per_token() const;
};

// The blocks of block_size tokens that `bytes` of cells hold (a KV cache cap in blocks); throws
// InvalidArgument when not even one fits, the message starting with `what` ("the KV cache cap").
int kv_blocks_within(size_t bytes, const KvSpec& spec, int block_size, const std::string& what);

class KvStorage {
public:
    KvStorage(const KvSpec& spec, int64_t n_cells, Backend& backend);
    ~KvStorage();
    KvStorage(const KvStorage&) = delete;
    KvStorage& operator=(const KvStorage&) = delete;

    const KvSpec& spec() const { return spec_; }
    // Unique among the process's caches, past and present (a new cache may take a freed one's
    // address): what a kept step graph (StepShape) names its cells by.
    uint64_t id() const { return id_; }
    int64_t n_cells() const { return n_cells_; }
    // One cell past the last, in no block: the rows a step adds to fill a graph kept across steps
    // (graph_ops.h, bucketed) write there, so no sequence's or cached prefix's cell changes.
    int64_t scratch_cell() const { return n_cells_; }
    size_t bytes() const;  // the cells' (the scratch cell and alignment not counted)
    ggml_tensor* k(int layer) const { return k_[layer]; }
    ggml_tensor* v(int layer) const { return v_[layer]; }

    struct CellCopy {
        int64_t from = 0, to = 0, n = 0;  // cells [from, from + n) -> [to, to + n)
    };
    // Copies runs of cells in every layer (one graph).
    void copy_cells(std::span<const CellCopy> copies, Backend& backend);
    // Applies a KvCacheManager's copy-on-write block copies (blocks of block_size cells).
    void copy_blocks(std::span<const BlockCopy> copies, int block_size, Backend& backend);

private:
    void allocate(Backend& backend);
    void free_memory();

    KvSpec spec_;
    int64_t n_cells_;
    uint64_t id_;
    std::vector<ggml_tensor*> k_, v_;
    ggml_context* ctx_ = nullptr;
    ggml_backend_buffer_t buffer_ = nullptr;
    void* mapped_ = nullptr;  // the cells' pages on a CPU backend (mmap), else null
    size_t mapped_bytes_ = 0;
    std::vector<uint8_t> graph_buf_;
};

}  // namespace parlance
