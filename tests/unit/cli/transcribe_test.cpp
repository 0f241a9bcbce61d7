// Black-box tests of `parlance transcribe` on the random-weight fixture models: every response
// format is well-formed, several files and -o work, and bad invocations exit non-zero with a
// message that says what was wrong. The fixtures' text is gibberish: structure is asserted, not
// words.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "audio/wav.h"
#include "test_support.h"

namespace parlance {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::TempDir;

using parlance::testing::quoted;

std::string jfk() { return (testing::fixtures_dir() / "audio" / "jfk.wav").string(); }
std::string model(const char* name) { return (testing::fixtures_dir() / "whisper" / name / "model").string(); }

// Runs `parlance transcribe ARGS`; *out gets stdout only (stderr dropped) when stdout_only,
// otherwise both.
int transcribe(const std::string& args, std::string* out, bool stdout_only = true) {
    std::string cmd = quoted(testing::parlance_binary().string());
    // Random weights babble to the token limit at every fallback temperature: one temperature
    // and a short limit keep each run to seconds.
    cmd.append(" transcribe -t 2 --temperature 0 --max-new-tokens 32 ").append(args);
    if (stdout_only) cmd = "(" + cmd + " 2>/dev/null)";
    return testing::run_command(cmd, out);
}

std::string tiny_en_args(const std::string& format) {
    return quoted(jfk()) + " --model " + quoted(model("tiny-en")) + " -f " + format;
}

void expect_openai_verbose(const json& j, const std::string& task) {
    ASSERT_TRUE(j.is_object()) << j.dump();
    EXPECT_EQ(j.at("task"), task);
    EXPECT_TRUE(j.at("language").is_string());
    EXPECT_FALSE(j.at("language").get<std::string>().empty());
    EXPECT_NEAR(j.at("duration").get<double>(), 11.0, 0.1);  // jfk.wav is 11 s
    EXPECT_TRUE(j.at("text").is_string());
    ASSERT_TRUE(j.at("segments").is_array());
    double last_end = 0;
    int id = 0;
    for (const auto& s : j.at("segments")) {
        for (const char* key : {"id", "seek", "start", "end", "text", "tokens", "temperature", "avg_logprob",
                                "compression_ratio", "no_speech_prob"})
            EXPECT_TRUE(s.contains(key)) << key << " missing in " << s.dump();
        EXPECT_EQ(s.at("id"), id++);
        EXPECT_TRUE(s.at("tokens").is_array());
        EXPECT_LE(s.at("start").get<double>(), s.at("end").get<double>());
        EXPECT_GE(s.at("start").get<double>(), last_end - 1e-6);
        last_end = s.at("end").get<double>();
    }
    EXPECT_LE(last_end, j.at("duration").get<double>() + 0.02);
}

TEST(Transcribe, Json) {
    std::string out;
    ASSERT_EQ(transcribe(tiny_en_args("json"), &out), 0) << out;
    json j = json::parse(out);
    ASSERT_TRUE(j.is_object());
    EXPECT_TRUE(j.at("text").is_string());
}

TEST(Transcribe, Text) {
    std::string out;
    ASSERT_EQ(transcribe(tiny_en_args("text"), &out), 0) << out;
    EXPECT_FALSE(out.empty());
    EXPECT_FALSE(json::accept(out)) << "text format printed JSON: " << out;
}

TEST(Transcribe, Srt) {
    std::string out;
    ASSERT_EQ(transcribe(tiny_en_args("srt"), &out), 0) << out;
    std::istringstream in(out);
    std::string line, prev;
    int cues = 0, expected_index = 1;
    while (std::getline(in, line)) {
        if (line.find("-->") != std::string::npos) {
            ++cues;
            EXPECT_TRUE(std::regex_match(line, std::regex(R"(\d\d:\d\d:\d\d,\d\d\d --> \d\d:\d\d:\d\d,\d\d\d)")))
                << line;
            EXPECT_EQ(prev, std::to_string(expected_index++)) << "cue number before " << line;
        }
        prev = line;
    }
    EXPECT_GT(cues, 0) << out;
}

TEST(Transcribe, Vtt) {
    std::string out;
    ASSERT_EQ(transcribe(tiny_en_args("vtt"), &out), 0) << out;
    ASSERT_EQ(out.rfind("WEBVTT", 0), 0u) << out;
    int cues = 0;
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line)) {
        if (line.find("-->") == std::string::npos) continue;
        ++cues;
        EXPECT_TRUE(std::regex_match(line, std::regex(R"((\d\d:)?\d\d:\d\d\.\d\d\d --> (\d\d:)?\d\d:\d\d\.\d\d\d)")))
            << line;
    }
    EXPECT_GT(cues, 0) << out;
}

TEST(Transcribe, VerboseJson) {
    std::string out;
    ASSERT_EQ(transcribe(tiny_en_args("verbose_json"), &out), 0) << out;
    json j = json::parse(out);
    expect_openai_verbose(j, "transcribe");
    EXPECT_EQ(j.at("language"), "en");  // an English-only model
}

TEST(Transcribe, TwoFilesAndOutputFile) {
    TempDir tmp;
    const fs::path other = testing::fixtures_dir() / "audio" / "espeak_quiet_loud.wav";
    const fs::path file = tmp / "out.txt";
    std::string out;
    ASSERT_EQ(transcribe(quoted(jfk()) + " " + quoted(other.string()) + " --model " + quoted(model("tiny-en")) +
                             " -f text -o " + quoted(file.string()),
                         &out),
              0)
        << out;
    EXPECT_TRUE(out.empty()) << "stdout should be empty with -o: " << out;
    ASSERT_TRUE(fs::exists(file));
    std::string text = testing::read_file(file);
    EXPECT_NE(text.find("== " + jfk()), std::string::npos) << text;
    EXPECT_NE(text.find("== " + other.string()), std::string::npos) << text;
    EXPECT_LT(text.find("== " + jfk()), text.find("== " + other.string()));
}

TEST(Transcribe, TwoFilesJsonToStdout) {
    std::string out;
    ASSERT_EQ(transcribe(quoted(jfk()) + " " + quoted(jfk()) + " --model " + quoted(model("tiny-en")) + " -f json",
                         &out),
              0)
        << out;
    // One JSON document per file, back to back.
    std::istringstream in(out);
    int docs = 0;
    while (in >> std::ws, in.peek() != EOF) {
        json j;
        ASSERT_NO_THROW(in >> j) << out;
        EXPECT_TRUE(j.contains("text"));
        ++docs;
    }
    EXPECT_EQ(docs, 2);
}

// Without --model, $PARLANCE_MODEL names the model to use.
TEST(Transcribe, ModelFromEnvironment) {
    std::string out;
    const std::string cmd = "PARLANCE_MODEL=" + quoted(model("tiny-en")) + " " +
                            quoted(testing::parlance_binary().string()) +
                            " transcribe -t 2 --temperature 0 --max-new-tokens 8 -f json " + quoted(jfk()) + " 2>&1";
    ASSERT_EQ(testing::run_command(cmd, &out), 0) << out;
    EXPECT_NE(out.find("tiny-en"), std::string::npos) << out;  // the load line names the model
    EXPECT_NE(out.find("\"text\""), std::string::npos) << out;
}

// Without --model and $PARLANCE_MODEL: the bundled default from the source tree when it is
// there, otherwise an error that says where it looked and what to pass.
TEST(Transcribe, DefaultModelOrAnErrorSayingWhereItLooked) {
    const fs::path bundled = testing::bundled_model_dir();
    std::string out;
    const std::string cmd = "env -u PARLANCE_MODEL " + quoted(testing::parlance_binary().string()) +
                            " transcribe -t 2 --temperature 0 --max-new-tokens 32 " + quoted(jfk()) + " 2>&1";
    const int rc = testing::run_command(cmd, &out);
    if (fs::exists(bundled / "config.json")) {
        EXPECT_EQ(rc, 0) << out;
        EXPECT_NE(out.find("parlance-synth-en"), std::string::npos) << out;
    } else {
        EXPECT_NE(rc, 0) << out;
        for (const char* part : {"no model given", "parlance-synth-en", "--model", "PARLANCE_MODEL"})
            EXPECT_NE(out.find(part), std::string::npos) << part << " not in: " << out;
    }
}

// Content, not just structure: the bundled model transcribes its held-out samples (sentences and
// a voice never used in training) without --model. Skipped only while no model is bundled.
TEST(Transcribe, DefaultModelTranscribesHeldOutSamples) {
    const fs::path samples = testing::bundled_model_dir() / "samples";
    if (!fs::exists(testing::bundled_model_dir() / "config.json")) GTEST_SKIP() << "no bundled model";
    for (const char* name : {"heldout_voice", "seen_voice"}) {
        const std::string ref = testing::read_file(samples / (std::string(name) + ".txt"));
        std::string out;
        const std::string cmd = "(env -u PARLANCE_MODEL " + quoted(testing::parlance_binary().string()) +
                                " transcribe -t 2 -f json " + quoted((samples / (std::string(name) + ".wav")).string()) +
                                " 2>/dev/null)";
        ASSERT_EQ(testing::run_command(cmd, &out), 0) << out;
        const std::string text = json::parse(out).at("text");
        EXPECT_TRUE(testing::words_match(ref, text)) << name << ": reference '" << ref << "', got '" << text << "'";
    }
}

// Silence gives no text with the bundled model as a user runs it (issue 5's "no text on
// silence"). The gate's thresholds reach the decoder: at 0 and 0 every window counts as silent
// (any <|nospeech|> probability exceeds 0, any average log-probability is below 0), so a clip the
// model transcribes gives no text.
TEST(Transcribe, DefaultModelSilenceGivesNoTextAndTheGateFollowsItsOptions) {
    if (!fs::exists(testing::bundled_model_dir() / "config.json"))
        GTEST_SKIP() << "no bundled model";
    TempDir tmp;
    const fs::path silence = tmp / "silence-5s.wav";
    parlance::write_wav_file(silence, std::vector<float>(16000 * 5, 0.0f), 16000);
    const fs::path speech = testing::bundled_model_dir() / "samples" / "seen_voice.wav";
    auto text = [](const fs::path& wav, const std::string& options) {
        std::string out;
        const std::string cmd =
            "(env -u PARLANCE_MODEL " + quoted(testing::parlance_binary().string()) +
            " transcribe -t 2 -f json " + quoted(wav.string()) + " " + options + " 2>/dev/null)";
        EXPECT_EQ(testing::run_command(cmd, &out), 0) << cmd << ": " << out;
        return json::parse(out).at("text").get<std::string>();
    };
    EXPECT_EQ(text(silence, ""), "");
    EXPECT_NE(text(speech, ""), "");
    EXPECT_EQ(text(speech, "--no-speech-threshold 0 --logprob-threshold 0"), "");
    EXPECT_NE(text(speech, "--no-speech-threshold 1 --logprob-threshold 0 --temperature 0"), "");
}

// Threshold values outside their range are refused before any model loads, with a message
// naming the option.
TEST(Transcribe, GateOptionsOutOfRangeAreErrors) {
    for (const char* bad :
         {"--no-speech-threshold 1.5", "--no-speech-threshold -0.1", "--no-speech-threshold nan",
          "--logprob-threshold 0.5", "--logprob-threshold abc", "--logprob-threshold=nan"}) {
        std::string out;
        EXPECT_NE(transcribe(tiny_en_args("json") + " " + bad, &out, false), 0) << bad;
        const std::string option = std::string(bad).substr(0, std::string(bad).find_first_of(" ="));
        EXPECT_NE(out.find(option), std::string::npos) << bad << ": " << out;
    }
}

// A long sample (ten held-out sentences, past one 30 s window) gives ordered segments inside
// the audio and most of its words.
TEST(Transcribe, DefaultModelLongSampleSegments) {
    const fs::path samples = testing::bundled_model_dir() / "samples";
    if (!fs::exists(samples / "long.wav")) GTEST_SKIP() << "no bundled model";
    std::string out;
    const std::string cmd = "(env -u PARLANCE_MODEL " + quoted(testing::parlance_binary().string()) +
                            " transcribe -t 2 -f verbose_json " + quoted((samples / "long.wav").string()) + " 2>/dev/null)";
    ASSERT_EQ(testing::run_command(cmd, &out), 0) << out;
    const json j = json::parse(out);
    const double duration = j.at("duration");
    EXPECT_GT(duration, 30.0);
    ASSERT_GE(j.at("segments").size(), 3u) << out;
    double last = 0;
    for (const auto& seg : j.at("segments")) {
        EXPECT_GE(seg.at("start").get<double>(), last - 0.1);
        EXPECT_LE(seg.at("end").get<double>(), duration + 0.5);
        last = seg.at("end");
    }
    EXPECT_TRUE(testing::words_match(testing::read_file(samples / "long.txt"), j.at("text"))) << out;
}

// Word timestamps from cross-attention on a trained model: the sample is one sentence with half a
// second of silence either side (make_samples.py), so the words must start after the lead-in, the
// last one must start before the tail, and they run in order. The last word may end inside the
// tail: a word ends where the next token's time starts, here the closing timestamp's, and this
// model's alignment heads reach it up to 0.9 s after the speech ends (tools/train/README.md, run 4).
TEST(Transcribe, DefaultModelWordTimestampsFollowTheSpeech) {
    const fs::path samples = testing::bundled_model_dir() / "samples";
    if (!fs::exists(samples / "seen_voice.wav")) GTEST_SKIP() << "no bundled model";
    std::string out;
    const std::string cmd = "(env -u PARLANCE_MODEL " + quoted(testing::parlance_binary().string()) +
                            " transcribe -t 2 --word-timestamps -f verbose_json " +
                            quoted((samples / "seen_voice.wav").string()) + " 2>/dev/null)";
    ASSERT_EQ(testing::run_command(cmd, &out), 0) << out;
    const json j = json::parse(out);
    const double duration = j.at("duration");
    const auto& words = j.at("words");
    ASSERT_GE(words.size(), 5u) << out;
    EXPECT_GE(words.front().at("start").get<double>(), 0.3) << out;
    EXPECT_LE(words.front().at("start").get<double>(), 1.2) << out;
    EXPECT_GE(words.back().at("start").get<double>(), duration - 1.5) << out;
    EXPECT_LE(words.back().at("start").get<double>(), duration - 0.5) << out;
    EXPECT_GE(words.back().at("end").get<double>(), duration - 1.2) << out;
    EXPECT_LE(words.back().at("end").get<double>(), duration) << out;
    double last = 0;
    for (const auto& w : words) {
        EXPECT_GE(w.at("start").get<double>(), last - 0.01) << out;
        EXPECT_GE(w.at("end").get<double>(), w.at("start").get<double>()) << out;
        last = w.at("end");
    }
}

// A model named by $PARLANCE_MODEL that is not there is an error naming the path.
TEST(Transcribe, MissingModelFromEnvironmentIsAnError) {
    std::string out;
    const std::string cmd = "PARLANCE_MODEL=/nonexistent/model " + quoted(testing::parlance_binary().string()) +
                            " transcribe " + quoted(jfk()) + " 2>&1";
    EXPECT_NE(testing::run_command(cmd, &out), 0) << out;
    EXPECT_NE(out.find("/nonexistent/model"), std::string::npos) << out;
}

TEST(Transcribe, NonAudioFileIsAnError) {
    TempDir tmp;
    const fs::path bogus = tmp / "notes.wav";
    testing::write_file(bogus, std::string("this is not audio, just a text file pretending\n"));
    std::string out;
    EXPECT_NE(transcribe(quoted(bogus.string()) + " --model " + quoted(model("tiny-en")), &out, false), 0) << out;
    EXPECT_NE(out.find(bogus.string()), std::string::npos) << out;
}

TEST(Transcribe, MissingFileIsAnError) {
    std::string out;
    EXPECT_NE(transcribe("/nonexistent/clip.wav --model " + quoted(model("tiny-en")), &out, false), 0) << out;
    EXPECT_NE(out.find("/nonexistent/clip.wav"), std::string::npos) << out;
}

TEST(Transcribe, UnknownFormatIsAnError) {
    std::string out;
    EXPECT_NE(transcribe(tiny_en_args("docx"), &out, false), 0) << out;
    EXPECT_NE(out.find("docx"), std::string::npos) << out;
}

TEST(Transcribe, MultilingualWithLanguage) {
    std::string out;
    ASSERT_EQ(transcribe(quoted(jfk()) + " --model " + quoted(model("tiny-multi")) + " --language en -f verbose_json",
                         &out),
              0)
        << out;
    json j = json::parse(out);
    expect_openai_verbose(j, "transcribe");
    EXPECT_EQ(j.at("language"), "en");
}

TEST(Transcribe, MultilingualTranslate) {
    std::string out;
    ASSERT_EQ(transcribe(quoted(jfk()) + " --model " + quoted(model("tiny-multi")) +
                             " --language de --task translate -f verbose_json",
                         &out),
              0)
        << out;
    json j = json::parse(out);
    expect_openai_verbose(j, "translate");
    EXPECT_EQ(j.at("language"), "de");
}

TEST(Transcribe, MultilingualDetectsLanguage) {
    std::string out;
    ASSERT_EQ(transcribe(quoted(jfk()) + " --model " + quoted(model("tiny-multi")) + " -f verbose_json", &out), 0)
        << out;
    json j = json::parse(out);
    expect_openai_verbose(j, "transcribe");
    // Random weights: any of the model's languages, but one must be filled in.
    const std::string lang = j.at("language").get<std::string>();
    EXPECT_TRUE(std::regex_match(lang, std::regex("[a-z]{2,3}"))) << lang;
}

TEST(Transcribe, UnknownLanguageIsAnError) {
    std::string out;
    EXPECT_NE(transcribe(quoted(jfk()) + " --model " + quoted(model("tiny-multi")) + " --language xx", &out, false),
              0)
        << out;
    EXPECT_NE(out.find("xx"), std::string::npos) << out;
}

TEST(Transcribe, ConvertedWhisperCppFileGivesTheSameTranscript) {
    TempDir tmp;
    const fs::path bin = tmp / "ggml-model-f32.bin";
    std::string out;
    std::string convert = quoted(testing::parlance_binary().string()) + " convert " + quoted(model("tiny-multi")) +
                          " --to whispercpp --dtype f32 -o " + quoted(bin.string());
    ASSERT_EQ(testing::run_command(convert, &out), 0) << out;
    EXPECT_NE(out.find("wrote "), std::string::npos) << out;
    std::string from_hf, from_bin;
    ASSERT_EQ(transcribe(quoted(jfk()) + " --model " + quoted(model("tiny-multi")) + " -l en -f verbose_json", &from_hf), 0);
    ASSERT_EQ(transcribe(quoted(jfk()) + " --model " + quoted(bin.string()) + " -l en -f verbose_json", &from_bin), 0)
        << from_bin;
    json a = json::parse(from_hf), b = json::parse(from_bin);
    EXPECT_EQ(a.at("text"), b.at("text"));
    ASSERT_EQ(a.at("segments").size(), b.at("segments").size());
    for (size_t i = 0; i < a.at("segments").size(); ++i)
        EXPECT_EQ(a["segments"][i]["tokens"], b["segments"][i]["tokens"]) << "segment " << i;
}

TEST(Transcribe, ConvertRejectsUnknownTarget) {
    TempDir tmp;
    std::string out;
    std::string convert = quoted(testing::parlance_binary().string()) + " convert " + quoted(model("tiny-multi")) +
                          " --to onnx -o " + quoted((tmp / "x").string());
    EXPECT_NE(testing::run_command(convert, &out), 0) << out;
    EXPECT_NE(out.find("onnx"), std::string::npos) << out;
}

}  // namespace
}  // namespace parlance
