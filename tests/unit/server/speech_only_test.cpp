// chunking_strategy server_vad (server/speech_only): times in the buffer of speech pieces back
// onto the file's timeline, and the speech of a file read as it is decoded (the VAD's pass, then
// the pieces read from a second pass) is keep_speech's buffer of the whole file, sample for sample.
#include <gtest/gtest.h>

#include "audio/decode.h"
#include "audio/wav.h"
#include "core/backend.h"
#include "models/registry.h"
#include "server/speech_only.h"
#include "test_support.h"

namespace parlance::server {
namespace {

TEST(SpeechOnly, TimesMapBackOntoTheFile) {
    SpeechOnly s;
    // Speech at 3.0-5.0 s and 9.5-10.5 s of the file, back to back with a 0.2 s gap.
    s.pieces = {{0.0, 3.0, 2.0, 48000, 80000}, {2.2, 9.5, 1.0, 152000, 168000}};
    EXPECT_DOUBLE_EQ(s.original_time(0.0), 3.0);
    EXPECT_DOUBLE_EQ(s.original_time(1.5), 4.5);
    EXPECT_DOUBLE_EQ(s.original_time(2.1), 5.0);  // in the gap: the end of the piece before
    EXPECT_DOUBLE_EQ(s.original_time(2.2), 9.5);
    EXPECT_DOUBLE_EQ(s.original_time(3.0), 10.3);
    EXPECT_DOUBLE_EQ(s.original_time(9.0), 10.5);  // past the end: the last piece's end
    Transcript t;
    Segment a;
    a.start = 0.4;
    a.end = 2.6;  // spans the cut
    a.words = {{"one", 0.4, 1.0, 0.9f}, {"two", 2.3, 2.6, 0.9f}};
    t.segments = {a};
    map_to_original(t, s);
    EXPECT_DOUBLE_EQ(t.segments[0].start, 3.4);
    EXPECT_DOUBLE_EQ(t.segments[0].end, 9.9);
    EXPECT_DOUBLE_EQ(t.segments[0].words[0].end, 4.0);
    EXPECT_DOUBLE_EQ(t.segments[0].words[1].start, 9.6);
}

TEST(SpeechOnly, AFileReadAsItIsDecodedGivesTheWholeFilesSpeech) {
    // Speech, 4 s of silence, speech, 3 s of silence, speech: three pieces with gaps between.
    const std::vector<float> jfk = read_wav_file(testing::fixtures_dir() / "audio" / "jfk.wav").samples;
    const std::vector<float> austen =
        read_wav_file(testing::fixtures_dir() / "audio" / "sense_and_sensibility_01_austen_64kb-0880.wav").samples;
    std::vector<float> file(jfk.begin(), jfk.begin() + 16000 * 5);
    file.insert(file.end(), 16000 * 4, 0.0f);
    file.insert(file.end(), austen.begin(), austen.end());
    file.insert(file.end(), 16000 * 3, 0.0f);
    file.insert(file.end(), jfk.begin() + 16000 * 5, jfk.end());
    const std::vector<uint8_t> bytes = encode_wav(file, 16000);
    Backend backend(BackendOptions{"cpu", 2, true, false});
    const std::unique_ptr<VoiceActivityModel> model =
        load_voice_activity_model(testing::assets_dir() / "silero_vad_v5.onnx", backend);
    VoiceActivityModel& vad = *model;
    const VadChunking chunking;

    const SpeechOnly whole = keep_speech(decode_audio(bytes), vad, chunking);
    ASSERT_GE(whole.pieces.size(), 3u);
    PcmSource first(std::make_unique<AudioStreamDecoder>(bytes));
    const SpeechOnly plan = find_speech(first, vad, chunking);
    EXPECT_TRUE(plan.pcm.empty());
    ASSERT_EQ(plan.pieces.size(), whole.pieces.size());
    for (size_t i = 0; i < plan.pieces.size(); ++i) {
        EXPECT_EQ(plan.pieces[i].begin, whole.pieces[i].begin) << i;
        EXPECT_EQ(plan.pieces[i].end, whole.pieces[i].end) << i;
        EXPECT_DOUBLE_EQ(plan.pieces[i].at, whole.pieces[i].at) << i;
    }
    // Read as a model reads: a window at a time, releasing what lies behind.
    auto speech = speech_source(std::make_shared<PcmSource>(std::make_unique<AudioStreamDecoder>(bytes)), plan);
    std::vector<float> got;
    for (size_t at = 0;; at += 16000 * 3) {
        const size_t have = speech->fill(at + 16000 * 3);
        const std::span<const float> v = speech->view(at, have);
        got.insert(got.end(), v.begin(), v.end());
        speech->release(have);
        if (have < at + 16000 * 3) break;
    }
    EXPECT_TRUE(speech->ended());
    EXPECT_EQ(got, whole.pcm);
}

}  // namespace
}  // namespace parlance::server
