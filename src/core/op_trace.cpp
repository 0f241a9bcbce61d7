// Op tracing for backend comparisons (see op_trace.h).
#include "core/op_trace.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/error.h"
#include "core/runtime_settings.h"

namespace parlance {
namespace {

// Nodes that compute nothing of their own: views, and writes into a cache (a set_rows node is the
// whole cache tensor; the rows it writes are its source's values).
bool is_view(const ggml_tensor* t) {
    switch (t->op) {
        case GGML_OP_SET_ROWS:
        case GGML_OP_NONE:
        case GGML_OP_VIEW:
        case GGML_OP_RESHAPE:
        case GGML_OP_PERMUTE:
        case GGML_OP_TRANSPOSE:
            return true;
        default:
            return false;
    }
}

template <size_t N>
void put_text(std::FILE* f, const char* text) {
    std::array<char, N> field{};  // zero-filled: the text, cut to N - 1 bytes, stays terminated
    std::memcpy(field.data(), text, std::min(std::strlen(text), N - 1));
    std::fwrite(field.data(), 1, N, f);
}

}  // namespace

OpTrace* OpTrace::active() {
    static OpTrace* trace = []() -> OpTrace* {
        const std::string& dir = runtime_settings().trace_ops_dir;
        if (dir.empty()) return nullptr;
        std::error_code ec;
        std::filesystem::create_directories(dir, ec);
        if (ec) throw Error(ErrorKind::Io, "PARLANCE_TRACE_OPS: cannot create " + dir + ": " + ec.message());
        return new OpTrace(dir);  // lives as long as the process
    }();
    return trace;
}

OpTrace::Scope::Scope(OpTrace& trace, ggml_cgraph* graph, ggml_backend_sched_t sched)
    : trace_(trace), lock_(trace.mutex_) {
    trace_.begin(graph, sched);
}

OpTrace::Scope::~Scope() {
    trace_.end();
}

void OpTrace::begin(ggml_cgraph* graph, ggml_backend_sched_t sched) {
    if (file_) std::fclose(file_);  // an earlier trace that never ended
    file_ = nullptr;
    failed_ = false;
    char name[32];
    std::snprintf(name, sizeof name, "graph-%05d.trace", graphs_++);
    const std::string path = dir_ + "/" + name;
    file_ = std::fopen(path.c_str(), "wb");
    if (file_ == nullptr) throw Error(ErrorKind::Io, "PARLANCE_TRACE_OPS: cannot write " + path);
    sched_ = sched;
    index_.clear();
    leaves_.clear();
    last_write_.clear();
    for (int i = 0; i < ggml_graph_n_nodes(graph); ++i) index_[ggml_graph_node(graph, i)] = i;
    ggml_backend_sched_set_eval_callback(sched, &OpTrace::observe, this);
}

void OpTrace::end() {
    if (sched_) ggml_backend_sched_set_eval_callback(sched_, nullptr, nullptr);
    sched_ = nullptr;
    if (file_ == nullptr) return;
    const bool incomplete = failed_ || std::ferror(file_);
    if (std::fclose(file_) != 0 || incomplete)
        std::fprintf(stderr, "PARLANCE_TRACE_OPS: graph-%05d.trace in %s is incomplete (a write failed)\n", graphs_ - 1,
                     dir_.c_str());
    file_ = nullptr;
}

bool OpTrace::observe(ggml_tensor* t, bool ask, void* self) {
    auto* trace = static_cast<OpTrace*>(self);
    if (ask && !is_view(t)) return true;  // wanted: written once computed
    try {
        trace->write(t, /*with_values=*/!ask);  // a view or cache write: its record, without values
    } catch (...) {  // nothing may unwind through ggml; the trace is marked incomplete instead
        trace->failed_ = true;
    }
    // After a computed node, always true: false would make ggml skip the rest of the split.
    return !ask;
}

int32_t OpTrace::source_of(const ggml_tensor* src) {
    const ggml_tensor* base = src->view_src ? src->view_src : src;
    if (const auto w = last_write_.find(base); w != last_write_.end()) return w->second;  // written in place
    if (const auto n = index_.find(src); n != index_.end() && !is_view(src)) return n->second;
    if (const auto n = index_.find(base); n != index_.end()) return n->second;  // a view: its base's data
    // Not computed by this graph: weights (the same on both sides) or data uploaded from the host
    // (the previous graph's results, which may differ: recorded once, as a leaf of its own).
    if (const auto l = leaves_.find(base); l != leaves_.end()) return l->second;
    const bool weights =
        base->buffer && ggml_backend_buffer_get_usage(base->buffer) == GGML_BACKEND_BUFFER_USAGE_WEIGHTS;
    if (weights) return -1;
    if (base->buffer == nullptr || ggml_nelements(base) > kMaxLeafValues) return -2;  // unknown
    const int32_t id = static_cast<int32_t>(index_.size() + leaves_.size());
    leaves_[base] = id;
    write_record(const_cast<ggml_tensor*>(base), static_cast<uint32_t>(id), {-1, -1, -1, -1}, true);
    return id;
}

void OpTrace::write(ggml_tensor* t, bool with_values) {
    const auto it = index_.find(t);
    const uint32_t index = it == index_.end() ? UINT32_MAX : static_cast<uint32_t>(it->second);
    std::array<int32_t, 4> sources{-1, -1, -1, -1};
    for (int s = 0; s < 4 && s < GGML_MAX_SRC; ++s)
        if (t->src[s]) sources[s] = source_of(t->src[s]);
    // Later readers of a tensor written in place (set_rows into a view of it) read this node.
    if (t->op == GGML_OP_SET_ROWS && t->view_src) last_write_[t->view_src] = static_cast<int32_t>(index);
    write_record(t, index, sources, with_values);
}

void OpTrace::write_record(ggml_tensor* t, uint32_t index, const std::array<int32_t, 4>& sources, bool with_values) {
    std::vector<float> values;
    const bool partly_written = std::strncmp(t->name, kPartlyWrittenPrefix, std::strlen(kPartlyWrittenPrefix)) == 0;
    const bool readable = with_values && !partly_written && ggml_is_contiguous(t) &&
                          (t->type == GGML_TYPE_F32 || t->type == GGML_TYPE_F16 || t->type == GGML_TYPE_BF16);
    if (readable) {
        ggml_backend_sched_synchronize(sched_);  // the node may still be computing on a device stream
        const int64_t n = ggml_nelements(t);
        std::vector<uint8_t> raw(ggml_nbytes(t));
        ggml_backend_tensor_get(t, raw.data(), 0, raw.size());
        values.resize(static_cast<size_t>(n));
        if (t->type == GGML_TYPE_F32)
            std::memcpy(values.data(), raw.data(), raw.size());
        else
            ggml_get_type_traits(t->type)->to_float(raw.data(), values.data(), n);
    }
    std::fwrite(&index, sizeof index, 1, file_);
    std::fwrite(sources.data(), sizeof(int32_t), sources.size(), file_);
    put_text<64>(file_, t->name);
    put_text<32>(file_, ggml_op_desc(t));
    std::fwrite(t->ne, sizeof(int64_t), 4, file_);
    const uint64_t count = values.size();
    std::fwrite(&count, sizeof count, 1, file_);
    if (count) std::fwrite(values.data(), sizeof(float), values.size(), file_);
}

}  // namespace parlance
