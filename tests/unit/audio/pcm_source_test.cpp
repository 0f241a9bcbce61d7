// PcmSource: audio read front to back, decoded a piece at a time from a file's bytes. What a
// reader gets piece by piece must be exactly decode_audio's output (resampler and decoder state
// carried across pieces), memory must follow the reader, not the file, and decoding errors met
// on the way must be decode_audio's.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "audio/cut_points.h"
#include "audio/decode.h"
#include "audio/pcm_source.h"
#include "core/error.h"
#include "test_support.h"

namespace parlance {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> pcm_test_file_bytes(const fs::path& p) {
    const std::string s = testing::read_file(p);
    return {s.begin(), s.end()};
}

// jfk.wav (11 s) repeated `copies` times and encoded by the ffmpeg CLI with `args`.
std::vector<uint8_t> encoded_jfk(const testing::TempDir& tmp, int copies, const std::string& args,
                                 const std::string& name) {
    const fs::path jfk = testing::fixtures_dir() / "audio" / "jfk.wav";
    const fs::path out = tmp.path() / name;
    const std::string cmd = "ffmpeg -hide_banner -loglevel error -y -stream_loop " + std::to_string(copies - 1) +
                            " -i '" + jfk.string() + "' " + args + " '" + out.string() + "'";
    std::string log;
    EXPECT_EQ(testing::run_command(cmd, &log), 0) << cmd << "\n" << log;
    return pcm_test_file_bytes(out);
}

// Reads `source` in windows of `window` samples, each starting `advance` after the one before and
// releasing what lies before it, as Whisper's windows and seek do; returns every sample once, in
// order, and the most the source held at once.
std::vector<float> read_windows(PcmSource& source, size_t window, size_t advance, size_t* most_held) {
    std::vector<float> out;
    *most_held = 0;
    for (size_t at = 0;; at += advance) {
        source.release(at);
        const size_t end = source.fill(at + window);
        const std::span<const float> v = source.view(at, end);
        EXPECT_TRUE(std::equal(out.begin() + static_cast<std::ptrdiff_t>(at), out.end(), v.begin()));  // the overlap
        out.insert(out.end(), v.begin() + static_cast<std::ptrdiff_t>(out.size() - at), v.end());
        *most_held = std::max(*most_held, source.held());
        if (end < at + window) {
            EXPECT_TRUE(source.ended());
            return out;
        }
    }
}

// A 16-bit mono 16 kHz WAV header announcing no samples.
std::vector<uint8_t> empty_wav() {
    std::vector<uint8_t> h;
    auto put = [&](uint32_t v, int n) {
        for (int i = 0; i < n; ++i) h.push_back(static_cast<uint8_t>(v >> (8 * i)));
    };
    h.insert(h.end(), {'R', 'I', 'F', 'F'});
    put(36, 4);
    h.insert(h.end(), {'W', 'A', 'V', 'E', 'f', 'm', 't', ' '});
    for (auto [v, n] : {std::pair{16u, 4}, {1u, 2}, {1u, 2}, {16000u, 4}, {32000u, 4}, {2u, 2}, {16u, 2}}) put(v, n);
    h.insert(h.end(), {'d', 'a', 't', 'a'});
    put(0, 4);
    return h;
}

class PcmSourceDecoding : public ::testing::Test {
protected:
    void SetUp() override {
        if (testing::run_command("ffmpeg -version") != 0) GTEST_SKIP() << "ffmpeg CLI not installed";
    }
    testing::TempDir tmp_;
};

// mp3 at 44.1 kHz stereo (downmixed and resampled) and FLAC, 132 s each, read in 30 s windows
// that overlap by 5 s: the same samples, bit for bit, as decoding the whole file, while holding
// about a window — not the file.
TEST_F(PcmSourceDecoding, ReadingInPiecesGivesTheWholeFilesSamplesAndHoldsAFewPieces) {
    for (const auto& [args, name] :
         {std::pair<std::string, std::string>{"-ac 2 -ar 44100 -c:a libmp3lame -b:a 96k", "a.mp3"},
          {"-c:a flac", "a.flac"}}) {
        SCOPED_TRACE(name);
        const std::vector<uint8_t> bytes = encoded_jfk(tmp_, 12, args, name);
        const std::vector<float> whole = decode_audio(bytes);
        ASSERT_GT(whole.size(), 16000u * 130);

        PcmSource source(std::make_unique<AudioStreamDecoder>(bytes));
        EXPECT_FALSE(source.ended());
        size_t most_held = 0;
        const std::vector<float> read = read_windows(source, 30 * 16000, 25 * 16000, &most_held);
        ASSERT_EQ(read.size(), whole.size());
        EXPECT_TRUE(read == whole);
        EXPECT_EQ(source.decoded(), whole.size());
        EXPECT_LE(most_held, size_t{40} * 16000) << "held " << most_held / 16000.0 << " s of 132 s";
    }
}

// The same reads from a source over samples in memory view them in place.
TEST(PcmSource, InMemoryViewsTheCallersSamples) {
    std::vector<float> pcm(40000);
    std::iota(pcm.begin(), pcm.end(), 0.0f);
    PcmSource source{std::span<const float>(pcm)};
    EXPECT_TRUE(source.ended());
    EXPECT_EQ(source.decoded(), pcm.size());
    EXPECT_EQ(source.fill(100), 100u);
    EXPECT_EQ(source.fill(50000), 40000u);
    EXPECT_EQ(source.view(1000, 2000).data(), pcm.data() + 1000);
    EXPECT_DOUBLE_EQ(source.seconds_hint(), 2.5);
    source.release(30000);
    EXPECT_EQ(source.view(30000, 40000).data(), pcm.data() + 30000);
    // Samples released or not decoded are a programming error, reported, never read.
    EXPECT_THROW(source.view(29999, 30000), Error);
    EXPECT_THROW(source.view(39000, 40001), Error);
}

// Errors a whole-file decode reports up front come when the reader gets there: a file that
// decodes to nothing at its first fill, audio past the limit when the reader passes it.
TEST_F(PcmSourceDecoding, DecodingErrorsComeAtTheFillThatMeetsThem) {
    const std::vector<uint8_t> header_only = empty_wav();
    PcmSource empty(std::make_unique<AudioStreamDecoder>(header_only));
    try {
        empty.fill(1);
        ADD_FAILURE() << "no error for a file without samples";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::InvalidAudio) << e.what();
    }

    // An mp3 without its Xing header (so no declared duration FFmpeg trusts) of 33 s against a
    // 20 s limit.
    const std::vector<uint8_t> mp3 = encoded_jfk(tmp_, 3, "-c:a libmp3lame -b:a 64k -write_xing 0", "b.mp3");
    DecodeOptions o;
    o.max_seconds = 20;
    PcmSource source(std::make_unique<AudioStreamDecoder>(mp3, o));
    EXPECT_EQ(source.fill(10 * 16000), 10u * 16000);
    try {
        source.fill(30 * 16000);
        ADD_FAILURE() << "no error past the limit";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::TooLarge) << e.what();
    }
}

// Qwen3-ASR's cut rule applied piece by piece, each piece seeing only the audio from its start,
// equals the cut of the whole audio.
TEST(QuietCut, PieceByPieceEqualsTheWholeAudiosCuts) {
    std::mt19937 rng(7);
    std::normal_distribution<float> noise(0.0f, 0.1f);
    std::vector<float> pcm(16000 * 200 + 1234);
    for (size_t i = 0; i < pcm.size(); ++i) pcm[i] = noise(rng) * (i % (16000 * 7) < 16000 ? 0.05f : 1.0f);
    for (double max_seconds : {30.0, 8.0, 0.05}) {
        const std::vector<size_t> whole = quiet_cut_points(pcm, max_seconds);
        std::vector<size_t> pieces = {0};
        while (pieces.back() < pcm.size())
            pieces.push_back(
                pieces.back() +
                quiet_piece_length(std::span<const float>(pcm).subspan(
                                       pieces.back(), std::min<size_t>(pcm.size() - pieces.back(),
                                                                       static_cast<size_t>(max_seconds * 16000) + 1)),
                                   max_seconds));
        EXPECT_EQ(pieces, whole) << max_seconds;
        EXPECT_GT(whole.size(), 2u);
    }
}

}  // namespace
}  // namespace parlance
