// Op tracing (PARLANCE_TRACE_OPS, src/core/op_trace.h) and its comparison tool
// (tools/op_trace/compare.py), the method issue 19 uses to find where two devices part: a trace
// does not depend on the thread count, and a change in one op's precision is found at that op.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "audio/wav.h"
#include "qwen3_fixture.h"
#include "test_support.h"

namespace {

using namespace parlance::testing;
namespace fs = std::filesystem;

// Traces one transcription of `clip` by `model` into `dir`.
void trace(const fs::path& model, const fs::path& clip, const fs::path& dir, const std::string& extra) {
    std::string out;
    const int rc =
        run_command("env PARLANCE_TRACE_OPS=" + quoted(dir.string()) + " " + quoted(parlance_binary().string()) +
                        " transcribe --model " + quoted(model.string()) + " --max-new-tokens 2 --format json " + extra +
                        " " + quoted(clip.string()) + " 2>&1",
                    &out);
    ASSERT_EQ(rc, 0) << out;
}

std::set<std::string> files(const fs::path& dir) {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
    return out;
}

std::string compare(const fs::path& a, const fs::path& b) {
    std::string out;
    const int rc = run_command(
        "python3 " +
            quoted((fixtures_dir().parent_path().parent_path() / "tools" / "op_trace" / "compare.py").string()) + " " +
            quoted(a.string()) + " " + quoted(b.string()) + " --top 3 2>&1",
        &out);
    EXPECT_EQ(rc, 0) << out;
    return out;
}

TEST(OpTrace, TracesDoNotDependOnThreadsAndTheComparisonFindsTheOpThatDiffers) {
    // A Qwen3-ASR checkpoint on 0.3 s of speech: every product of the step is one of ggml's CPU
    // kernels or ours, which split rows, not sums, between threads (products of 32 columns and
    // more, a longer clip's encoder, go to BLAS, whose blocking follows the thread count).
    TempDir tmp;
    const fs::path model = write_qwen3_asr("tiny", tmp / "model");
    const std::vector<float> pcm = parlance::read_wav_file(fixtures_dir() / "audio" / "jfk.wav").samples;
    parlance::write_wav_file(tmp / "clip.wav", std::span<const float>(pcm).subspan(16000, 4800), 16000);
    trace(model, tmp / "clip.wav", tmp / "one", "--threads 1");
    trace(model, tmp / "clip.wav", tmp / "two", "--threads 2");
    trace(model, tmp / "clip.wav", tmp / "q8", "--threads 2 --quantize q8_0");
    const std::set<std::string> graphs = files(tmp / "one");
    ASSERT_GE(graphs.size(), 3u);  // the encoder, the prompt step, a decode step
    EXPECT_TRUE(graphs.count("graph-00000.trace"));
    ASSERT_EQ(graphs, files(tmp / "two"));
    for (const std::string& g : graphs)  // every node's output, bit for bit
        EXPECT_TRUE(read_file(tmp / "one" / g) == read_file(tmp / "two" / g)) << g;

    // Quantized weights: the first rows of the ranking are products whose inputs were identical
    // (the difference starts there), not the ops after them that only carry it.
    const std::string report = compare(tmp / "one", tmp / "q8");
    const size_t ranking = report.find("ratio = own");
    ASSERT_NE(ranking, std::string::npos) << report;
    std::istringstream in(report.substr(ranking));
    std::string header, columns, first;
    std::getline(in, header);
    std::getline(in, columns);
    std::getline(in, first);
    // A product: ggml's (MUL_MAT) or the multi-column kernel's op (CUSTOM), which takes q8_0
    // weights for steps of a few columns.
    EXPECT_TRUE(first.find("MUL_MAT") != std::string::npos || first.find("CUSTOM") != std::string::npos) << report;
    // Columns: ratio, own difference, inputs' difference.
    double ratio = 0, own = 0, inputs = -1;
    ASSERT_EQ(std::sscanf(first.c_str(), "%lf %lf %lf", &ratio, &own, &inputs), 3) << first;
    EXPECT_GT(own, 1e-5) << report;
    EXPECT_EQ(inputs, 0.0) << "the first product's inputs were identical\n" << report;
    // And the thread counts compare as identical everywhere.
    const std::string same = compare(tmp / "one", tmp / "two");
    EXPECT_EQ(same.find("e-0"), std::string::npos) << same;
}

}  // namespace
