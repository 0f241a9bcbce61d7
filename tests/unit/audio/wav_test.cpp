// WAV reader/writer: round trip, real files, malformed headers.
#include <gtest/gtest.h>

#include "audio/wav.h"
#include "core/error.h"
#include "test_support.h"

namespace parlance {
namespace {

TEST(Wav, RoundTripIsExactOnTheS16Grid) {
    std::vector<float> x = {0.0f, 1.0f / 32768, -1.0f, 32767.0f / 32768, -0.5f, 0.25f};
    const auto bytes = encode_wav(x, 16000);
    EXPECT_EQ(bytes.size(), 44u + 2 * x.size());
    const WavAudio w = read_wav(bytes);
    EXPECT_EQ(w.sample_rate, 16000);
    EXPECT_EQ(w.channels, 1);
    EXPECT_EQ(w.samples, x);
}

TEST(Wav, WriterClampsAndRounds) {
    const std::vector<float> x = {2.0f, -2.0f, 0.4f / 32768};
    const WavAudio w = read_wav(encode_wav(x, 8000));
    EXPECT_EQ(w.samples[0], 32767.0f / 32768);
    EXPECT_EQ(w.samples[1], -1.0f);
    EXPECT_EQ(w.samples[2], 0.0f);
}

TEST(Wav, ReadsRealRecordingsWithExtraChunks) {
    // jfk.wav has a LIST chunk before data.
    const WavAudio w = read_wav_file(testing::fixtures_dir() / "audio" / "jfk.wav");
    EXPECT_EQ(w.sample_rate, 16000);
    EXPECT_EQ(w.channels, 1);
    EXPECT_EQ(w.samples.size(), 176000u);
}

TEST(Wav, FileRoundTrip) {
    testing::TempDir tmp;
    const std::vector<float> x = {0.125f, -0.125f};
    write_wav_file(tmp / "a.wav", x, 24000);
    const WavAudio w = read_wav_file(tmp / "a.wav");
    EXPECT_EQ(w.sample_rate, 24000);
    EXPECT_EQ(w.samples, x);
    try {
        read_wav_file(tmp / "missing.wav");
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::Io);
    }
}

TEST(Wav, RejectsMalformed) {
    auto expect_invalid = [](std::vector<uint8_t> bytes) {
        try {
            read_wav(bytes);
            ADD_FAILURE() << "accepted";
        } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::InvalidAudio) << e.what();
        }
    };
    const auto good = encode_wav(std::vector<float>(10, 0.1f), 16000);
    expect_invalid({});
    expect_invalid(std::vector<uint8_t>(good.begin(), good.begin() + 30));
    auto bad = good;
    bad[22] = 0;  // channels = 0
    expect_invalid(bad);
    bad = good;
    bad[24] = 5, bad[25] = 0, bad[26] = 0, bad[27] = 0;  // 5 Hz
    expect_invalid(bad);
    bad = good;
    bad[34] = 8;  // 8-bit
    expect_invalid(bad);
    bad = good;
    bad[20] = 3;  // IEEE float
    expect_invalid(bad);
}

TEST(Wav, TruncatedDataIsReadToTheEnd) {
    auto bytes = encode_wav(std::vector<float>(100, 0.5f), 16000);
    bytes.resize(44 + 2 * 60 + 1);
    EXPECT_EQ(read_wav(bytes).samples.size(), 60u);
}

}  // namespace
}  // namespace parlance
