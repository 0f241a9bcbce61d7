// A file transcribed as it is decoded (a PcmSource over an AudioStreamDecoder: what `parlance
// transcribe FILE` does) gives exactly the transcript of its samples decoded whole — Whisper's
// 30 s windows and seek, Qwen3-ASR's pieces cut at quiet points — while the source holds about a
// window of audio, not the file.
#include <gtest/gtest.h>

#include <algorithm>

#include "audio/decode.h"
#include "audio/pcm_source.h"
#include "audio/wav.h"
#include "core/backend.h"
#include "engine/lm_speech_model.h"
#include "qwen3_fixture.h"
#include "test_support.h"

namespace parlance::testing {
namespace {

void expect_same(const Transcript& a, const Transcript& b) {
    EXPECT_EQ(a.text, b.text);
    EXPECT_EQ(a.language, b.language);
    EXPECT_DOUBLE_EQ(a.duration, b.duration);
    ASSERT_EQ(a.segments.size(), b.segments.size());
    for (size_t i = 0; i < a.segments.size(); ++i) {
        SCOPED_TRACE(i);
        EXPECT_EQ(a.segments[i].text, b.segments[i].text);
        EXPECT_EQ(a.segments[i].tokens, b.segments[i].tokens);
        EXPECT_DOUBLE_EQ(a.segments[i].start, b.segments[i].start);
        EXPECT_DOUBLE_EQ(a.segments[i].end, b.segments[i].end);
    }
}

// Transcribes `bytes` both ways; returns the most audio the decoding source held at a progress
// report (after each window or piece), in seconds.
double transcribe_both_ways(SpeechModel& model, const std::vector<uint8_t>& bytes, TranscribeOptions o) {
    const std::vector<float> whole = decode_audio(bytes);
    const Transcript from_samples = model.transcribe(whole, o);

    PcmSource source(std::make_unique<AudioStreamDecoder>(bytes));
    size_t most_held = 0;
    int reports = 0;
    o.progress = [&](double, double) {
        most_held = std::max(most_held, source.held());
        ++reports;
    };
    const Transcript from_file = model.transcribe(source, o);
    expect_same(from_samples, from_file);
    EXPECT_GE(reports, 2);
    EXPECT_TRUE(source.ended());
    EXPECT_EQ(source.decoded(), whole.size());
    return static_cast<double>(most_held) / 16000.0;
}

// The bundled model over long.wav (51 s, two windows with seek inside the first).
TEST(TranscribeFromFile, WhisperWindowsReadAsTheFileDecodesGiveTheSameTranscript) {
    Backend backend(BackendOptions{"cpu", 2, true, false});
    auto model = open_speech_model(bundled_model_dir(), backend, {});
    const std::string wav = read_file(bundled_model_dir() / "samples" / "long.wav");
    const double held = transcribe_both_ways(*model, {wav.begin(), wav.end()}, {});
    EXPECT_LE(held, 32.0);  // a window, plus what the decoder hands out at a time
}

// The same over an ADTS AAC stream of long.wav, which declares no duration: the first window's
// segment times are the audio's own (they were clamped to the unknown length, 0, once).
TEST(TranscribeFromFile, AFileThatDeclaresNoDurationKeepsItsSegmentTimes) {
    if (run_command("ffmpeg -version") != 0) GTEST_SKIP() << "ffmpeg CLI not installed";
    TempDir dir;
    const std::filesystem::path aac = dir.path() / "long.aac";
    const std::string cmd = "ffmpeg -hide_banner -loglevel error -y -i '" +
                            (bundled_model_dir() / "samples" / "long.wav").string() + "' -c:a aac -f adts '" +
                            aac.string() + "'";
    std::string log;
    ASSERT_EQ(run_command(cmd, &log), 0) << cmd << "\n" << log;
    const std::string bytes = read_file(aac);
    ASSERT_LT(AudioStreamDecoder(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()))
                  .declared_seconds(),
              0.0);
    Backend backend(BackendOptions{"cpu", 2, true, false});
    auto model = open_speech_model(bundled_model_dir(), backend, {});
    PcmSource source(std::make_unique<AudioStreamDecoder>(
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size())));
    const Transcript t = model->transcribe(source, {});
    ASSERT_GE(t.segments.size(), 3u);
    EXPECT_GT(t.segments.front().end, 0.5);
    for (size_t i = 1; i < t.segments.size(); ++i) EXPECT_GT(t.segments[i].start, t.segments[i - 1].start) << i;
    EXPECT_GT(t.duration, 50.0);
    transcribe_both_ways(*model, {bytes.begin(), bytes.end()}, {});
}

// Qwen3-ASR (tiny, random weights) over 66 s: pieces of at most 30 s, cut in the quiet before each limit.
TEST(TranscribeFromFile, Qwen3AsrPiecesCutAsTheFileDecodesGiveTheSameTranscript) {
    TempDir dir;
    Backend backend(BackendOptions{"cpu", 2, true, false});
    auto model = open_speech_model(write_qwen3_asr("tiny", dir.path()), backend, {});
    const std::vector<float> jfk = read_wav_file(fixtures_dir() / "audio" / "jfk.wav").samples;
    std::vector<float> longer;
    for (int i = 0; i < 6; ++i) longer.insert(longer.end(), jfk.begin(), jfk.end());
    TranscribeOptions o;
    o.max_new_tokens = 4;
    const double held = transcribe_both_ways(*model, encode_wav(longer, 16000), o);
    EXPECT_LE(held, 32.0);
}

}  // namespace
}  // namespace parlance::testing
