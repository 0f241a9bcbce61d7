// `parlance generate` as users run it: transformers' greedy ids through --format json, text
// output, --min-tokens, and the errors a careless invocation gets.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "qwen3_fixture.h"
#include "test_support.h"
#include "text/tokenizer.h"

namespace parlance::testing {
namespace {

using nlohmann::json;

std::string run_and_capture(const std::string& command, int* status) {
    std::string out;
    *status = run_command(command, &out);
    return out;
}

std::string generate(const std::string& args, int* status = nullptr) {
    std::string out;
    const int rc = run_command(quoted(parlance_binary().string()) + " generate " + args + " 2>&1", &out);
    if (status) *status = rc;
    return out;
}

TEST(Generate, JsonGivesTransformersGreedyIdsFromHfAndGguf) {
    TempDir d, g;
    const json ref = qwen3_reference("tiny");
    const json& c = ref["cases"][1];
    const int n = c["greedy_fixed"]["max_new_tokens"];
    for (const auto& model :
         {write_qwen3("tiny", d.path()), write_qwen3("tiny", g.path(), {GGML_TYPE_BF16, 1, true})}) {
        int rc = -1;
        const std::string out =
            generate("--model " + quoted(model.string()) + " --prompt " + quoted(c["text"]) + " --max-tokens " +
                         std::to_string(n) + " --min-tokens " + std::to_string(n) + " --format json",
                     &rc);
        ASSERT_EQ(rc, 0) << out;
        const json j = json::parse(out);
        EXPECT_EQ(j["prompt_ids"], c["prompt_ids"]);
        EXPECT_EQ(j["ids"], c["greedy_fixed"]["ids"]);
        EXPECT_EQ(j["finish_reason"], "length");
        EXPECT_FALSE(j["text"].get<std::string>().empty());
    }
}

TEST(Generate, TextOutputAndCarelessInvocations) {
    TempDir d;
    const auto model = write_qwen3("tiny", d.path());
    int rc = -1;
    std::string out = generate("--model " + quoted(model.string()) + " --prompt Hello --max-tokens 3 --stream", &rc);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_FALSE(out.empty());
    out = generate("--model " + quoted(model.string()) + " --max-tokens 3", &rc);
    EXPECT_NE(rc, 0);
    EXPECT_NE(out.find("--prompt"), std::string::npos) << out;
    out = generate("--model " + quoted(model.string()) + " --prompt Hi --max-tokens 2 --min-tokens 5", &rc);
    EXPECT_NE(rc, 0);
    EXPECT_NE(out.find("--min-tokens"), std::string::npos) << out;
    out = generate("--model " + quoted(bundled_model_dir().string()) + " --prompt Hi", &rc);
    EXPECT_NE(rc, 0);
    EXPECT_NE(out.find("do not generate text"), std::string::npos) << out;
    // The other way round: the registry refuses a language model where speech is expected.
    out = run_and_capture(quoted(parlance_binary().string()) + " transcribe --model " + quoted(model.string()) + " " +
                              quoted((fixtures_dir() / "audio/jfk.wav").string()) + " 2>&1",
                          &rc);
    EXPECT_NE(rc, 0);
    EXPECT_NE(out.find("do not transcribe speech"), std::string::npos) << out;
}

// --kv-cache-type f16 halves the cache's cells: the same prompt, transformers' ids on the tiny
// fixture (its logits move by about 1e-3 of their range, far from any tie here), and a type the
// cache cannot store is refused naming the flag.
TEST(Generate, KvCacheTypeF16) {
    TempDir d;
    const json ref = qwen3_reference("tiny");
    const json& c = ref["cases"][1];
    const int n = c["greedy_fixed"]["max_new_tokens"];
    const auto model = write_qwen3("tiny", d.path());
    const std::string base = "--model " + quoted(model.string()) + " --prompt " + quoted(c["text"]) + " --max-tokens " +
                             std::to_string(n) + " --min-tokens " + std::to_string(n) + " --format json";
    int rc = -1;
    std::string out = generate(base + " --kv-cache-type f16", &rc);
    ASSERT_EQ(rc, 0) << out;
    const json j = json::parse(out);
    EXPECT_EQ(j["prompt_ids"], c["prompt_ids"]);
    EXPECT_EQ(j["ids"], c["greedy_fixed"]["ids"]);
    out = generate(base + " --kv-cache-type q4_0", &rc);
    EXPECT_NE(rc, 0);
    EXPECT_NE(out.find("--kv-cache-type"), std::string::npos) << out;
}

// `transcribe` opens a Qwen3-ASR checkpoint as it opens Whisper: verbose_json with the clip as one
// segment; --language takes a code or a name; what the model cannot do fails naming it.
TEST(Generate, TranscribeRunsAQwen3AsrCheckpoint) {
    TempDir d;
    const auto model = write_qwen3_asr("tiny", d.path());
    const std::string base = quoted(parlance_binary().string()) + " transcribe --model " + quoted(model.string()) +
                             " " + quoted((fixtures_dir() / "audio/jfk.wav").string());
    int rc = -1;
    std::string out = run_and_capture(
        base + " --format verbose_json --language English -o " + quoted((d / "out.json").string()), &rc);
    ASSERT_EQ(rc, 0) << out;
    const json j = json::parse(read_file(d / "out.json"));
    EXPECT_EQ(j["language"], "en");
    EXPECT_EQ(j["segments"].size(), 1u);
    out = run_and_capture(base + " --beam-size 3 2>&1", &rc);
    EXPECT_NE(rc, 0);
    EXPECT_NE(out.find("greedily"), std::string::npos) << out;
    // --min-new-tokens/--max-new-tokens as transformers' fixed-length greedy: the reference's ids.
    const json c = qwen3_asr_reference("tiny")["cases"][0];
    const int n = c["greedy_auto"]["max_new_tokens"];
    out = run_and_capture(base + " --format json --max-new-tokens " + std::to_string(n) + " --min-new-tokens " +
                              std::to_string(n) + " -o " + quoted((d / "fixed.json").string()),
                          &rc);
    ASSERT_EQ(rc, 0) << out;
    const Tokenizer tok = Tokenizer::from_json_file(model / "tokenizer.json");
    std::string text = tok.decode(c["greedy_auto"]["ids"].get<std::vector<int32_t>>(), /*skip_special=*/true);
    text.erase(0, text.find_first_not_of(" \n"));
    text.erase(text.find_last_not_of(" \n") + 1);
    EXPECT_EQ(json::parse(read_file(d / "fixed.json"))["text"], text);
}

// llama.cpp's GGUF pair of the same weights through the CLI: the directory, or the text file with
// --mmproj, transcribes exactly as the HF snapshot does; `info` describes both files.
TEST(Generate, TranscribeAndInfoReadLlamaCppsGgufPair) {
    TempDir d;
    const auto hf = write_qwen3_asr("tiny", d / "hf");
    const auto pair = write_qwen3_asr("tiny", d / "pair", /*gguf_pair=*/true);
    const std::string wav = quoted((fixtures_dir() / "audio/jfk.wav").string());
    auto transcribe = [&](const std::string& model, const std::string& out) {
        int rc = -1;
        const std::string log = run_and_capture(quoted(parlance_binary().string()) + " transcribe --model " + model +
                                                    " " + wav + " --format verbose_json -o " + quoted(out) + " 2>&1",
                                                &rc);
        EXPECT_EQ(rc, 0) << log;
        return json::parse(read_file(out));
    };
    const json from_hf = transcribe(quoted(hf.string()), (d / "hf.json").string());
    const json from_dir = transcribe(quoted(pair.string()), (d / "dir.json").string());
    const json from_files =
        transcribe(quoted((pair / "model.gguf").string()) + " --mmproj " + quoted((pair / "mmproj.gguf").string()),
                   (d / "files.json").string());
    EXPECT_EQ(from_dir["text"], from_hf["text"]);
    EXPECT_EQ(from_dir["segments"], from_hf["segments"]);
    EXPECT_EQ(from_files, from_dir);
    int rc = -1;
    const json info =
        json::parse(run_and_capture(quoted(parlance_binary().string()) + " info --json " + quoted(pair.string()), &rc));
    EXPECT_EQ(rc, 0);
    EXPECT_EQ(info["architecture"], "qwen3vl");
    EXPECT_EQ(info["files"], 2);
    EXPECT_EQ(info["mmproj"]["projector_type"], "qwen3a");
    EXPECT_EQ(info["mmproj"]["dimensions"]["clip.audio.block_count"], 2);
    EXPECT_EQ(info["dimensions"]["qwen3vl.block_count"], 2) << info.dump();  // the text model's, from its keys
    // The projector alone is a file info describes too.
    const json projector = json::parse(run_and_capture(
        quoted(parlance_binary().string()) + " info --json " + quoted((pair / "mmproj.gguf").string()), &rc));
    EXPECT_EQ(rc, 0);
    EXPECT_EQ(projector["architecture"], "clip");
    // The text model alone is refused, naming what it needs.
    const std::string out = run_and_capture(quoted(parlance_binary().string()) + " transcribe --model " +
                                                quoted((pair / "model.gguf").string()) + " " + wav + " 2>&1",
                                            &rc);
    EXPECT_NE(rc, 0);
    EXPECT_NE(out.find("--mmproj"), std::string::npos) << out;
}

TEST(Generate, PromptFileAndSeededSamplingAsTheIssueSpellsThem) {
    TempDir d;
    const auto model = write_qwen3("tiny", d.path());
    const json ref = qwen3_reference("tiny");
    write_file(d / "prompt.txt", ref["cases"][1]["text"].get<std::string>());
    const std::string base = "--model " + quoted(model.string()) + " --max-tokens 6 --format json";
    int rc = -1;
    const json from_file = json::parse(generate(base + " --prompt-file " + quoted((d / "prompt.txt").string()), &rc));
    EXPECT_EQ(rc, 0);
    EXPECT_EQ(from_file["prompt_ids"], ref["cases"][1]["prompt_ids"]);
    const std::string sampled = base + " --prompt Hello --temperature 0.9 --seed 7";
    const json a = json::parse(generate(sampled, &rc));
    EXPECT_EQ(rc, 0);
    const json b = json::parse(generate(sampled, &rc));
    EXPECT_EQ(a["ids"], b["ids"]) << "the same seed gives the same tokens";
    const json c = json::parse(generate(base + " --prompt Hello --temperature 0.9 --seed 8", &rc));
    EXPECT_NE(a["ids"], c["ids"]);
    const std::string both = generate(base + " --prompt Hi --prompt-file " + quoted((d / "prompt.txt").string()), &rc);
    EXPECT_NE(rc, 0);
    EXPECT_NE(both.find("exactly one of --prompt and --prompt-file"), std::string::npos) << both;
}

TEST(Generate, ParityCommandComparesWithTransformers) {
    TempDir d;
    const auto model = write_qwen3("layout-0.6b", d.path());
    std::string out;
    const std::string fixture = (fixtures_dir() / "qwen3" / "layout-0.6b").string();
    int rc = run_command(quoted(parlance_binary().string()) + " parity " + quoted(fixture) + " --model " +
                             quoted(model.string()) + " 2>&1",
                         &out);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("20 of 20 checks"), std::string::npos) << out;
    rc = run_command(quoted(parlance_binary().string()) + " parity " + quoted(fixture) + " 2>&1", &out);
    EXPECT_NE(rc, 0);
    EXPECT_NE(out.find("write_qwen3_fixture"), std::string::npos) << out;
}

// The same command on a Qwen3-ASR reference: features, encoder, prompts, logits and greedy ids of
// each clip through the CLI, as Qwen3AsrParity checks them in-process.
TEST(Generate, ParityCommandComparesAQwen3AsrCheckpoint) {
    TempDir d;
    const auto model = write_qwen3_asr("tiny", d.path());
    const std::string fixture = (fixtures_dir() / "qwen3_asr" / "tiny").string();
    const size_t cases = qwen3_asr_reference("tiny")["cases"].size();
    std::string out;
    const int rc = run_command(quoted(parlance_binary().string()) + " parity " + quoted(fixture) + " --model " +
                                   quoted(model.string()) + " 2>&1",
                               &out);
    EXPECT_EQ(rc, 0) << out;
    const std::string n = std::to_string(9 * cases);
    EXPECT_NE(out.find(n + " of " + n + " checks"), std::string::npos) << out;
    for (const char* check : {"audio_tokens", "prompt_forced_english", "logits", "greedy_context", "greedy_stop"})
        EXPECT_NE(out.find(check), std::string::npos) << check;
    EXPECT_NE(run_command(quoted(parlance_binary().string()) + " parity " + quoted(fixture) + " 2>&1", &out), 0);
    EXPECT_NE(out.find("write_qwen3_fixture asr:tiny"), std::string::npos) << out;
}

}  // namespace
}  // namespace parlance::testing
