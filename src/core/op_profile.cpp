// Op profiling (see op_profile.h).
#include "core/op_profile.h"
#include "core/runtime_settings.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace parlance {
namespace {

int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

std::string shape_of(const ggml_tensor* t) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s[%lld,%lld,%lld,%lld]", ggml_type_name(t->type), static_cast<long long>(t->ne[0]),
                  static_cast<long long>(t->ne[1]), static_cast<long long>(t->ne[2]),
                  static_cast<long long>(t->ne[3]));
    return buf;
}

}  // namespace

OpProfile* OpProfile::active() {
    static OpProfile* profile = []() -> OpProfile* {
        if (!runtime_settings().profile_ops) return nullptr;
        auto* p = new OpProfile();  // lives as long as the process; reported at its exit
        std::atexit([] { OpProfile::active()->report(stderr); });
        return p;
    }();
    return profile;
}

OpProfile::Scope::Scope(OpProfile& profile, ggml_backend_sched_t sched)
    : profile_(profile), sched_(sched), lock_(profile.mutex_) {
    ++profile_.graphs_;
    ggml_backend_sched_set_eval_callback(sched_, &OpProfile::observe, &profile_);
}

OpProfile::Scope::~Scope() {
    ggml_backend_sched_set_eval_callback(sched_, nullptr, nullptr);
}

std::string OpProfile::key_of(const ggml_tensor* t) {
    std::string key = ggml_op_desc(t);
    // Products and attention by their operands' shapes (what picks the kernel); other ops by
    // their output's type alone, so the rows stay few.
    if (t->op == GGML_OP_MUL_MAT || t->op == GGML_OP_FLASH_ATTN_EXT || t->op == GGML_OP_IM2COL ||
        t->op == GGML_OP_SOFT_MAX) {
        // Appended piece by piece: `" " + std::string&&` trips GCC 12's -Wrestrict false positive.
        for (int i = 0; i < 2 && t->src[i]; ++i) {
            key += ' ';
            key += shape_of(t->src[i]);
        }
    } else {
        key += std::string(" ") + ggml_type_name(t->type);
    }
    return key;
}

bool OpProfile::observe(ggml_tensor* t, bool ask, void* self) {
    auto* p = static_cast<OpProfile*>(self);
    if (ask) {
        // Views compute nothing: they ride along with the next node that does.
        const bool view = t->op == GGML_OP_NONE || t->op == GGML_OP_VIEW || t->op == GGML_OP_RESHAPE ||
                          t->op == GGML_OP_PERMUTE || t->op == GGML_OP_TRANSPOSE;
        if (!view) p->started_ns_ = now_ns();
        return !view;
    }
    Row& r = p->rows_[key_of(t)];
    ++r.calls;
    r.seconds += static_cast<double>(now_ns() - p->started_ns_) * 1e-9;
    return true;
}

void OpProfile::report(std::FILE* out, int rows) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::pair<std::string, Row>> sorted(rows_.begin(), rows_.end());
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
    double total = 0.0;
    for (const auto& [key, r] : sorted) total += r.seconds;
    std::fprintf(out, "op profile: %lld graphs, %.3f s in nodes (each synchronised)\n", static_cast<long long>(graphs_),
                 total);
    std::fprintf(out, "%10s %8s %6s  %s\n", "seconds", "calls", "share", "op operands");
    for (size_t i = 0; i < sorted.size() && i < static_cast<size_t>(rows); ++i) {
        const auto& [key, r] = sorted[i];
        std::fprintf(out, "%10.4f %8lld %5.1f%%  %s\n", r.seconds, static_cast<long long>(r.calls),
                     total > 0 ? 100.0 * r.seconds / total : 0.0, key.c_str());
    }
}

}  // namespace parlance
