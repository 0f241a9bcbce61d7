// The PARLANCE_* environment variables (see runtime_environment.h).
#include "cli/runtime_environment.h"

#include <cstdlib>
#include <initializer_list>
#include <string>

#include "core/error.h"

namespace parlance::cli {
namespace {

// The variable's value ("" when unset), which must be one of `allowed` when set.
std::string read(const char* name, std::initializer_list<const char*> allowed = {}) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') return "";
    if (allowed.size() == 0) return v;
    std::string list;
    for (const char* a : allowed) {
        if (std::string(v) == a) return v;
        list += (list.empty() ? "" : ", ") + std::string(a);
    }
    throw Error(ErrorKind::InvalidArgument,
                std::string(name) + "=" + v + ": not a value it takes (" + list + ", or unset)");
}

}  // namespace

RuntimeSettings runtime_settings_from_environment() {
    RuntimeSettings s;
    s.attention_layout = read("PARLANCE_ATTENTION_LAYOUT", {"gpu", "padded"});
    s.cpu_kernels = read("PARLANCE_CPU_KERNELS", {"avx2", "none"});
    s.huge_pages = read("PARLANCE_HUGE_PAGES", {"off", "on"}) != "off";
    s.gpu_default_accumulation = read("PARLANCE_GPU_ACCUMULATION", {"default", "f32"}) == "default";
    const std::string profile = read("PARLANCE_PROFILE_OPS", {"0", "1"});
    s.profile_ops = profile == "1";
    s.trace_ops_dir = read("PARLANCE_TRACE_OPS");
    return s;
}

void apply_runtime_environment() {
    set_runtime_settings(runtime_settings_from_environment());
}

void apply_deterministic_gpu() {
    RuntimeSettings s = runtime_settings_from_environment();
    s.deterministic_gpu = true;
    set_runtime_settings(s);
}

}  // namespace parlance::cli
