// Decoding from memory across containers/codecs (inputs made at test time with the ffmpeg CLI),
// raw PCM and G.711, resampling, and every rejected-input case with its exact error kind.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "audio/decode.h"
#include "audio/wav.h"
#include "core/error.h"
#include "test_support.h"

namespace parlance {
namespace {

namespace fs = std::filesystem;

fs::path jfk_wav() { return testing::fixtures_dir() / "audio" / "jfk.wav"; }

std::vector<uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }
std::vector<uint8_t> file_bytes(const fs::path& p) { return bytes_of(testing::read_file(p)); }

// Runs ffmpeg to convert jfk.wav with the given output arguments; returns the produced file's bytes.
std::vector<uint8_t> transcode(const testing::TempDir& tmp, const std::string& args, const std::string& name) {
    const fs::path out = tmp / name;
    const std::string cmd = "ffmpeg -hide_banner -loglevel error -y -i '" + jfk_wav().string() + "' " + args + " '" + out.string() + "'";
    std::string log;
    EXPECT_EQ(testing::run_command(cmd, &log), 0) << cmd << "\n" << log;
    return file_bytes(out);
}

ErrorKind kind_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.kind();
    }
    ADD_FAILURE() << "no parlance::Error thrown";
    return ErrorKind::Internal;
}

// Normalised cross-correlation at the best lag in [-max_lag, max_lag].
double best_correlation(const std::vector<float>& a, const std::vector<float>& b, int max_lag) {
    double best = -1.0;
    const int n = static_cast<int>(std::min(a.size(), b.size())) - 2 * max_lag;
    for (int lag = -max_lag; lag <= max_lag; ++lag) {
        double ab = 0, aa = 0, bb = 0;
        for (int i = max_lag; i < max_lag + n; ++i) {
            const double x = a[static_cast<size_t>(i)], y = b[static_cast<size_t>(i + lag)];
            ab += x * y;
            aa += x * x;
            bb += y * y;
        }
        best = std::max(best, ab / std::sqrt(aa * bb + 1e-30));
    }
    return best;
}

// A 44-byte PCM WAV header followed by `data_bytes` zero bytes.
std::vector<uint8_t> wav_header(int channels, int rate, int bits, uint32_t data_bytes) {
    std::vector<uint8_t> h;
    auto put = [&](uint32_t v, int n) {
        for (int i = 0; i < n; ++i) h.push_back(static_cast<uint8_t>(v >> (8 * i)));
    };
    h.insert(h.end(), {'R', 'I', 'F', 'F'});
    put(36 + data_bytes, 4);
    h.insert(h.end(), {'W', 'A', 'V', 'E', 'f', 'm', 't', ' '});
    put(16, 4);
    put(1, 2);
    put(static_cast<uint32_t>(channels), 2);
    put(static_cast<uint32_t>(rate), 4);
    put(static_cast<uint32_t>(rate * channels * bits / 8), 4);
    put(static_cast<uint32_t>(channels * bits / 8), 2);
    put(static_cast<uint32_t>(bits), 2);
    h.insert(h.end(), {'d', 'a', 't', 'a'});
    put(data_bytes, 4);
    h.resize(h.size() + data_bytes, 0);
    return h;
}

class DecodeFormats : public ::testing::Test {
protected:
    void SetUp() override {
        if (testing::run_command("ffmpeg -version") != 0) GTEST_SKIP() << "ffmpeg CLI not installed";
        original_ = read_wav_file(jfk_wav()).samples;
    }
    void check(const std::vector<uint8_t>& bytes, bool lossless, double min_corr) {
        const auto pcm = decode_audio(bytes);
        EXPECT_NEAR(static_cast<double>(pcm.size()) / 16000.0, 11.0, 0.11);  // +-1 %
        for (float v : pcm) ASSERT_TRUE(std::isfinite(v) && std::fabs(v) <= 1.5f);
        if (lossless) {
            ASSERT_EQ(pcm.size(), original_.size());
            EXPECT_EQ(pcm, original_);
        } else {
            EXPECT_GT(best_correlation(original_, pcm, 1200), min_corr);
        }
    }
    testing::TempDir tmp_;
    std::vector<float> original_;
};

TEST_F(DecodeFormats, Wav16kIsExact) { check(file_bytes(jfk_wav()), true, 1.0); }
TEST_F(DecodeFormats, Flac) { check(transcode(tmp_, "-c:a flac", "a.flac"), true, 1.0); }
TEST_F(DecodeFormats, Mp3) { check(transcode(tmp_, "-c:a libmp3lame -b:a 64k", "a.mp3"), false, 0.95); }
TEST_F(DecodeFormats, Mpga) { check(transcode(tmp_, "-c:a libmp3lame -b:a 32k -f mp3", "a.mpga"), false, 0.9); }
TEST_F(DecodeFormats, M4aAac) { check(transcode(tmp_, "-c:a aac -b:a 64k", "a.m4a"), false, 0.95); }
TEST_F(DecodeFormats, Mp4Aac) { check(transcode(tmp_, "-c:a aac -b:a 64k", "a.mp4"), false, 0.95); }
TEST_F(DecodeFormats, OggOpus) { check(transcode(tmp_, "-c:a libopus -b:a 48k", "a.ogg"), false, 0.9); }
TEST_F(DecodeFormats, OggVorbis) { check(transcode(tmp_, "-c:a libvorbis -q:a 4", "a.oga"), false, 0.9); }
TEST_F(DecodeFormats, WebmOpus) { check(transcode(tmp_, "-c:a libopus -b:a 48k", "a.webm"), false, 0.9); }
TEST_F(DecodeFormats, Wav44kStereoIsDownmixedAndResampled) {
    // Same signal in both channels: the channel average is the signal itself.
    const auto bytes = transcode(tmp_, "-ac 2 -ar 44100 -c:a pcm_s16le", "a.wav");
    check(bytes, false, 0.995);
    // Opposite-phase channels average to (near) silence: proves averaging, not "take the left".
    const auto anti = transcode(tmp_, "-af \"pan=stereo|c0=c0|c1=-1*c0\" -c:a pcm_s16le", "anti.wav");
    const auto pcm = decode_audio(anti);
    double peak = 0;
    for (float v : pcm) peak = std::max(peak, static_cast<double>(std::fabs(v)));
    EXPECT_LT(peak, 1e-3);
}
TEST_F(DecodeFormats, OutputRateOption) {
    DecodeOptions o;
    o.sample_rate = 8000;
    const auto pcm = decode_audio(file_bytes(jfk_wav()), o);
    EXPECT_NEAR(static_cast<double>(pcm.size()), 88000.0, 100.0);
}

TEST_F(DecodeFormats, TruncatedMp3ReturnsWhatDecoded) {
    auto bytes = transcode(tmp_, "-c:a libmp3lame -b:a 64k", "t.mp3");
    bytes.resize(bytes.size() / 2);
    const auto pcm = decode_audio(bytes);
    EXPECT_NEAR(static_cast<double>(pcm.size()) / 16000.0, 5.5, 0.3);
}

TEST_F(DecodeFormats, VideoWithoutAudioIsRejected) {
    const fs::path out = tmp_ / "v.mkv";
    ASSERT_EQ(testing::run_command("ffmpeg -hide_banner -loglevel error -y -f lavfi -i testsrc=size=64x64:rate=5 -t 1 -c:v mjpeg '" +
                                   out.string() + "'"),
              0);
    EXPECT_EQ(kind_of([&] { decode_audio(file_bytes(out)); }), ErrorKind::InvalidAudio);
}

TEST(Decode, TruncatedWavReturnsWhatDecoded) {
    auto bytes = file_bytes(jfk_wav());
    const auto full = read_wav_file(jfk_wav()).samples;
    bytes.resize(44 + 2 * 20000 + 1);  // mid-sample cut
    const auto pcm = decode_audio(bytes);
    ASSERT_GE(pcm.size(), 19000u);
    ASSERT_LE(pcm.size(), 20000u);
    for (size_t i = 0; i < pcm.size(); ++i) ASSERT_EQ(pcm[i], full[i]) << i;
}

// on_read reports the input offset the demuxer has reached, every 4 MiB, increasing, within the
// input (the CLI drops a mapped file's pages behind it); the audio is the same with or without it.
TEST(Decode, OnReadFollowsTheInput) {
    const uint32_t data_bytes = 16000 * 2 * 400;  // 400 s of 16 kHz silence: 12.8 MB
    std::vector<uint8_t> bytes = wav_header(1, 16000, 16, data_bytes);
    bytes.resize(bytes.size() + data_bytes, 0);
    std::vector<size_t> offsets;
    DecodeOptions o;
    o.on_read = [&](size_t offset) { offsets.push_back(offset); };
    const auto pcm = decode_audio(bytes, o);
    EXPECT_EQ(pcm.size(), size_t(16000) * 400);
    ASSERT_GE(offsets.size(), 2u);
    for (size_t i = 0; i < offsets.size(); ++i) {
        EXPECT_LE(offsets[i], bytes.size());
        if (i > 0) {
            EXPECT_GE(offsets[i], offsets[i - 1] + (size_t(4) << 20));
        }
    }
    EXPECT_EQ(decode_audio(bytes), pcm);
}

TEST(Decode, EmptyInput) {
    EXPECT_EQ(kind_of([] { decode_audio({}); }), ErrorKind::InvalidAudio);
}

TEST(Decode, RandomBytes) {
    std::mt19937 rng(1234);
    for (size_t size : {1u, 17u, 4096u, 200000u}) {
        std::vector<uint8_t> bytes(size);
        for (auto& b : bytes) b = static_cast<uint8_t>(rng());
        EXPECT_EQ(kind_of([&] { decode_audio(bytes); }), ErrorKind::InvalidAudio) << size;
    }
    EXPECT_EQ(kind_of([] { decode_audio(bytes_of("hello, this is plainly text and not audio at all\n")); }),
              ErrorKind::InvalidAudio);
}

TEST(Decode, TruncatedWavHeader) {
    auto bytes = file_bytes(jfk_wav());
    bytes.resize(30);
    EXPECT_EQ(kind_of([&] { decode_audio(bytes); }), ErrorKind::InvalidAudio);
}

TEST(Decode, HeaderOnlyWavHasNoSamples) {
    EXPECT_EQ(kind_of([] { decode_audio(wav_header(1, 16000, 16, 0)); }), ErrorKind::InvalidAudio);
}

TEST(Decode, ZeroChannels) {
    const auto good = wav_header(1, 16000, 16, 3200);
    EXPECT_NO_THROW(decode_audio(good));  // the same header with 1 channel is fine
    EXPECT_EQ(kind_of([] { decode_audio(wav_header(0, 16000, 16, 3200)); }), ErrorKind::InvalidAudio);
}

TEST(Decode, TooManyChannels) {
    EXPECT_EQ(kind_of([] { decode_audio(wav_header(65, 16000, 16, 65 * 2 * 100)); }), ErrorKind::InvalidAudio);
}

TEST(Decode, AbsurdSampleRates) {
    EXPECT_EQ(kind_of([] { decode_audio(wav_header(1, 5, 16, 3200)); }), ErrorKind::InvalidAudio);
    EXPECT_EQ(kind_of([] { decode_audio(wav_header(1, 999, 16, 3200)); }), ErrorKind::InvalidAudio);
    EXPECT_EQ(kind_of([] { decode_audio(wav_header(1, 1000000, 16, 32000)); }), ErrorKind::InvalidAudio);
    EXPECT_NO_THROW(decode_audio(wav_header(1, 1000, 16, 3200)));
}

TEST(Decode, TooLong) {
    const auto bytes = file_bytes(jfk_wav());
    DecodeOptions o;
    o.max_seconds = 2.0;
    EXPECT_EQ(kind_of([&] { decode_audio(bytes, o); }), ErrorKind::TooLarge);
    o.max_seconds = 11.5;
    EXPECT_NO_THROW(decode_audio(bytes, o));
}

TEST(Decode, BadOptions) {
    const auto bytes = file_bytes(jfk_wav());
    DecodeOptions o;
    o.sample_rate = 10;
    EXPECT_EQ(kind_of([&] { decode_audio(bytes, o); }), ErrorKind::InvalidArgument);
    o = {};
    o.max_seconds = 0;
    EXPECT_EQ(kind_of([&] { decode_audio(bytes, o); }), ErrorKind::InvalidArgument);
}

TEST(G711, MuLawKnownValues) {
    EXPECT_EQ(mulaw_to_linear(0xFF), 0);
    EXPECT_EQ(mulaw_to_linear(0x7F), 0);
    EXPECT_EQ(mulaw_to_linear(0x00), -32124);
    EXPECT_EQ(mulaw_to_linear(0x80), 32124);
    EXPECT_EQ(mulaw_to_linear(0xFE), 8);   // smallest positive step
    EXPECT_EQ(mulaw_to_linear(0xEF), 132);  // segment 1 start: (0x84 << 1) - 0x84
    // Symmetric and monotonic within each half.
    for (int c = 0; c < 128; ++c) EXPECT_EQ(mulaw_to_linear(static_cast<uint8_t>(c)), -mulaw_to_linear(static_cast<uint8_t>(c | 0x80)));
    for (int c = 0x80; c < 0xFF; ++c) EXPECT_GT(mulaw_to_linear(static_cast<uint8_t>(c)), mulaw_to_linear(static_cast<uint8_t>(c + 1)));
}

TEST(G711, ALawKnownValues) {
    EXPECT_EQ(alaw_to_linear(0xD5), 8);
    EXPECT_EQ(alaw_to_linear(0x55), -8);
    EXPECT_EQ(alaw_to_linear(0xAA), 32256);
    EXPECT_EQ(alaw_to_linear(0x2A), -32256);
    for (int c = 0; c < 128; ++c) EXPECT_EQ(alaw_to_linear(static_cast<uint8_t>(c)), -alaw_to_linear(static_cast<uint8_t>(c | 0x80)));
}

TEST(G711, MatchesFfmpegDecoder) {
    if (testing::run_command("ffmpeg -version") != 0) GTEST_SKIP() << "ffmpeg CLI not installed";
    // All 256 codes through FFmpeg's own mu-law / A-law decoders must equal our tables.
    testing::TempDir tmp;
    std::string codes(256, '\0');
    for (int i = 0; i < 256; ++i) codes[static_cast<size_t>(i)] = static_cast<char>(i);
    testing::write_file(tmp / "codes.raw", codes);
    for (auto [fmt, fn] : {std::pair{"mulaw", &mulaw_to_linear}, {"alaw", &alaw_to_linear}}) {
        const std::string cmd = std::string("ffmpeg -hide_banner -loglevel error -y -f ") + fmt + " -ar 8000 -ac 1 -i '" +
                                (tmp / "codes.raw").string() + "' -f s16le '" + (tmp / "out.raw").string() + "'";
        ASSERT_EQ(testing::run_command(cmd), 0) << cmd;
        const std::string pcm = testing::read_file(tmp / "out.raw");
        ASSERT_EQ(pcm.size(), 512u);
        for (int i = 0; i < 256; ++i) {
            int16_t v;
            std::memcpy(&v, pcm.data() + 2 * i, 2);
            EXPECT_EQ(fn(static_cast<uint8_t>(i)), v) << fmt << " code " << i;
        }
    }
}

TEST(DecodePcm, G711Scaling) {
    const std::vector<uint8_t> mu = {0xFF, 0x00, 0x80};
    const auto a = decode_pcm(mu, PcmEncoding::MuLaw, 16000);
    ASSERT_EQ(a.size(), 3u);
    EXPECT_EQ(a[0], 0.0f);
    EXPECT_EQ(a[1], -32124.0f / 32768.0f);
    EXPECT_EQ(a[2], 32124.0f / 32768.0f);
    const std::vector<uint8_t> al = {0xD5, 0xAA};
    const auto b = decode_pcm(al, PcmEncoding::ALaw, 16000);
    EXPECT_EQ(b[0], 8.0f / 32768.0f);
    EXPECT_EQ(b[1], 32256.0f / 32768.0f);
    // 8 kHz telephone audio comes out at 16 kHz.
    EXPECT_NEAR(static_cast<double>(decode_pcm(std::vector<uint8_t>(8000, 0xFF), PcmEncoding::MuLaw, 8000).size()), 16000.0, 40.0);
}

// A 440 Hz tone as s16le at `rate`, decoded to 16 kHz: right length, right pitch.
TEST(DecodePcm, S16AtSeveralRates) {
    for (int rate : {8000, 16000, 22050, 24000, 44100, 48000}) {
        std::vector<uint8_t> bytes;
        const int n = rate;  // 1 s
        for (int i = 0; i < n; ++i) {
            const auto v = static_cast<int16_t>(std::lround(16000.0 * std::sin(2 * std::numbers::pi * 440.0 * i / rate)));
            bytes.push_back(static_cast<uint8_t>(v & 0xFF));
            bytes.push_back(static_cast<uint8_t>((v >> 8) & 0xFF));
        }
        const auto pcm = decode_pcm(bytes, PcmEncoding::S16LE, rate);
        EXPECT_NEAR(static_cast<double>(pcm.size()), 16000.0, 40.0) << rate;
        int crossings = 0;
        for (size_t i = 1000; i + 1 < 15000; ++i) crossings += (pcm[i] < 0) != (pcm[i + 1] < 0);
        EXPECT_NEAR(crossings, 2 * 440 * 14000 / 16000, 3) << rate;
        if (rate == 16000) {
            EXPECT_EQ(pcm[1], static_cast<float>(static_cast<int16_t>(bytes[2] | (bytes[3] << 8))) / 32768.0f);
        }
    }
}

TEST(DecodePcm, Errors) {
    EXPECT_EQ(kind_of([] { decode_pcm(std::vector<uint8_t>(3, 0), PcmEncoding::S16LE, 16000); }), ErrorKind::InvalidAudio);
    EXPECT_EQ(kind_of([] { decode_pcm(std::vector<uint8_t>(4, 0), PcmEncoding::S16LE, 5); }), ErrorKind::InvalidArgument);
    EXPECT_TRUE(decode_pcm({}, PcmEncoding::S16LE, 8000).empty());
}

TEST(Resample, StreamingEqualsOneShot) {
    std::mt19937 rng(9);
    std::normal_distribution<float> noise(0.0f, 0.1f);
    std::vector<float> x(48000);
    for (auto& v : x) v = noise(rng);
    const auto once = resample(x, 48000, 16000);
    EXPECT_NEAR(static_cast<double>(once.size()), 16000.0, 16.0);
    Resampler r(48000, 16000);
    std::vector<float> streamed;
    for (size_t i = 0; i < x.size(); i += 1234) r.push(std::span<const float>(x).subspan(i, std::min<size_t>(1234, x.size() - i)), &streamed);
    r.flush(&streamed);
    ASSERT_EQ(streamed.size(), once.size());
    for (size_t i = 0; i < once.size(); ++i) ASSERT_NEAR(streamed[i], once[i], 1e-6f) << i;
    EXPECT_EQ(resample(x, 16000, 16000), x);
    EXPECT_EQ(kind_of([&] { resample(x, 0, 16000); }), ErrorKind::InvalidArgument);
}

TEST(Resample, UpAndDownKeepsTheSignal) {
    const auto x = read_wav_file(jfk_wav()).samples;
    const auto up = resample(x, 16000, 44100);
    EXPECT_NEAR(static_cast<double>(up.size()), x.size() * 44100.0 / 16000.0, 50.0);
    const auto back = resample(up, 44100, 16000);
    EXPECT_GT(best_correlation(x, back, 20), 0.995);
}

}  // namespace
}  // namespace parlance
