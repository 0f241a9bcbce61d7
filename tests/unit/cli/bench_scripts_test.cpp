// Every benchmark script the documentation names is in the tree and parses: a script BENCHMARKS.md
// tells readers to run must not be a file a .gitignore rule kept out of the repository (as
// bench/build_llama_server.sh once was), nor one that no longer parses. Running them needs the
// anchors' builds and minutes each; their syntax and presence are what CI can check.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <regex>
#include <set>
#include <string>

#include "test_support.h"

namespace parlance::testing {
namespace {

namespace fs = std::filesystem;

TEST(BenchScripts, EveryScriptTheDocsNameExistsAndParses) {
    const fs::path root = fs::weakly_canonical(fixtures_dir() / ".." / "..");
    std::vector<fs::path> docs = {root / "BENCHMARKS.md", root / "README.md"};
    for (const auto& e : fs::directory_iterator(root / "docs"))
        if (e.path().extension() == ".md") docs.push_back(e.path());
    // bench/... names ending in a script or source extension; bench/build/ holds build outputs.
    const std::regex name(R"(bench/[A-Za-z0-9_./-]+\.(sh|py|mjs|cpp|h))");
    std::set<std::string> named;
    for (const fs::path& doc : docs) {
        const std::string text = read_file(doc);
        for (auto it = std::sregex_iterator(text.begin(), text.end(), name); it != std::sregex_iterator(); ++it)
            if (it->str().rfind("bench/build/", 0) != 0) named.insert(it->str());
    }
    ASSERT_GE(named.size(), 8u) << "the docs name the benchmark scripts";
    for (const std::string& n : named) {
        SCOPED_TRACE(n);
        const fs::path p = root / n;
        ASSERT_TRUE(fs::is_regular_file(p)) << "named in the docs but not in the tree";
        std::string check;
        if (p.extension() == ".sh") check = "bash -n '" + p.string() + "'";
        if (p.extension() == ".py") check = "python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read())' '" + p.string() + "'";
        if (!check.empty()) {
            EXPECT_EQ(std::system((check + " 2>&1").c_str()), 0) << check;
        }
    }
    // And what those scripts call in turn (bench/*.sh naming bench/*.sh).
    for (const auto& e : fs::directory_iterator(root / "bench")) {
        if (e.path().extension() != ".sh") continue;
        const std::string text = read_file(e.path());
        const std::regex called(R"(bench/([A-Za-z0-9_-]+\.(sh|py)))");
        for (auto it = std::sregex_iterator(text.begin(), text.end(), called); it != std::sregex_iterator(); ++it)
            EXPECT_TRUE(fs::is_regular_file(root / "bench" / (*it)[1].str()))
                << e.path().filename() << " calls bench/" << (*it)[1].str();
    }
}

}  // namespace
}  // namespace parlance::testing
