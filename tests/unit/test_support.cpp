// Test helpers (see test_support.h).
#include "test_support.h"

#include <array>
#include <cctype>
#include <map>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <sys/wait.h>

#include "cli/runtime_environment.h"

namespace parlance::testing {

// The PARLANCE_* settings ctest gives a test (PARLANCE_ATTENTION_LAYOUT, PARLANCE_CPU_KERNELS),
// applied before any test runs, as the command's main() applies them.
namespace {
const bool g_runtime_environment_applied = [] {
    cli::apply_runtime_environment();
    return true;
}();
}  // namespace

std::filesystem::path assets_dir() {
    if (const char* env = std::getenv("PARLANCE_ASSETS")) return env;
    return PARLANCE_ASSETS_DIR;
}
std::filesystem::path fixtures_dir() { return PARLANCE_FIXTURES_DIR; }
std::filesystem::path parlance_binary() { return PARLANCE_BINARY; }
std::filesystem::path bundled_model_dir() {
    return fixtures_dir().parent_path().parent_path() / "models" / "parlance-synth-en";
}

bool words_match(const std::string& reference, const std::string& hypothesis) {
    return !words(reference).empty() && !words(hypothesis).empty() && word_recall(reference, hypothesis) >= 0.8 &&
           word_recall(hypothesis, reference) >= 0.6;
}

std::vector<std::string> words(const std::string& text) {
    std::vector<std::string> out;
    std::string cur;
    for (char ch : text) {
        const auto c = static_cast<unsigned char>(ch);
        if (std::isalpha(c) || c == '\'') {
            cur += static_cast<char>(std::tolower(c));
        } else if (!cur.empty()) {
            out.push_back(cur);
            cur.clear();
        }
    }
    if (!cur.empty()) out.push_back(cur);
    return out;
}

double word_recall(const std::string& reference, const std::string& hypothesis) {
    std::map<std::string, int> have;
    for (const auto& w : words(hypothesis)) ++have[w];
    const auto ref = words(reference);
    int found = 0;
    for (const auto& w : ref)
        if (have[w]-- > 0) ++found;
    return ref.empty() ? 1.0 : static_cast<double>(found) / static_cast<double>(ref.size());
}

TempDir::TempDir() {
    std::random_device rd;
    auto base = std::filesystem::temp_directory_path();
    for (int attempt = 0; attempt < 100; ++attempt) {
        auto candidate = base / ("parlance-test-" + std::to_string(rd()));
        if (std::filesystem::create_directory(candidate)) {
            path_ = candidate;
            return;
        }
    }
    throw std::runtime_error("could not create a temporary directory");
}

TempDir::~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
}

std::string read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + path.string());
    std::ostringstream os;
    os << in.rdbuf();
    return os.str();
}

void write_file(const std::filesystem::path& path, const std::string& bytes) {
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw std::runtime_error("cannot write " + path.string());
}

std::string quoted(const std::string& text) {
    // Appended piecewise: GCC 12's -Wrestrict misfires on "'" + std::string.
    std::string q;
    q.reserve(text.size() + 2);
    q.push_back('\'');
    q.append(text);
    q.push_back('\'');
    return q;
}

int run_command(const std::string& command, std::string* output) {
    std::string cmd = command + " 2>&1";
    FILE* pipe = popen(cmd.c_str(), "r");
    if (!pipe) return -1;
    std::array<char, 4096> buf;
    std::string out;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
    int status = pclose(pipe);
    if (output) *output = out;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace parlance::testing
