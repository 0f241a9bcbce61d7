// A live session's audio in (server/realtime_audio_in.h): every format to 16 kHz samples, the
// resampler's state carried across appends, a change of format starting afresh, and bytes that are
// not whole samples refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "audio/decode.h"
#include "core/error.h"
#include "server/realtime_audio_in.h"

namespace parlance::server {
namespace {

// A second of a 440 Hz tone as 16-bit little-endian PCM at `rate`.
std::vector<uint8_t> tone_s16(int rate) {
    std::vector<uint8_t> b;
    for (int i = 0; i < rate; ++i) {
        const auto v = static_cast<int16_t>(8000 * std::sin(2 * M_PI * 440.0 * i / rate));
        b.push_back(static_cast<uint8_t>(v & 0xff));
        b.push_back(static_cast<uint8_t>((v >> 8) & 0xff));
    }
    return b;
}

// The bytes in appends of `chunk` bytes each.
std::vector<float> in_chunks(RealtimeAudioIn& in, const std::vector<uint8_t>& bytes, size_t chunk) {
    std::vector<float> out;
    for (size_t at = 0; at < bytes.size(); at += chunk) {
        const size_t n = std::min(chunk, bytes.size() - at);
        const std::vector<float> part = in.decode({bytes.data() + at, n});
        out.insert(out.end(), part.begin(), part.end());
    }
    return out;
}

TEST(RealtimeAudioIn, EachFormatGivesWhatOneResamplerGivesWhereverTheChunksAreCut) {
    struct Case {
        RealtimeAudioFormat format;
        int rate;
        PcmEncoding encoding;
        bool g711;
    };
    for (const Case c : {Case{RealtimeAudioFormat::Pcm24k, 24000, PcmEncoding::S16LE, false},
                         Case{RealtimeAudioFormat::Pcm16k, 16000, PcmEncoding::S16LE, false},
                         Case{RealtimeAudioFormat::Pcmu, 8000, PcmEncoding::MuLaw, true},
                         Case{RealtimeAudioFormat::Pcma, 8000, PcmEncoding::ALaw, true}}) {
        SCOPED_TRACE(c.rate);
        // G.711's bytes: any byte is a sample (the tone's 16-bit bytes serve as a signal).
        const std::vector<uint8_t> bytes = tone_s16(c.rate);
        std::vector<float> want = decode_pcm(bytes, c.encoding, c.g711 ? 8000 : c.rate, c.g711 ? 8000 : c.rate);
        if (c.rate != 16000) {
            Resampler r(c.rate, 16000);
            std::vector<float> out;
            r.push(want, &out);
            want = out;
        }
        for (size_t chunk : {bytes.size(), size_t{960}, size_t{302}}) {
            RealtimeAudioIn in(c.format);
            EXPECT_EQ(in_chunks(in, bytes, chunk), want) << "appends of " << chunk << " bytes";
        }
    }
}

TEST(RealtimeAudioIn, AChangeOfFormatStartsAfreshAndTheSameFormatKeepsTheState) {
    const std::vector<uint8_t> a = tone_s16(24000), b = tone_s16(8000);
    RealtimeAudioIn fresh(RealtimeAudioFormat::Pcmu);
    const std::vector<float> want = fresh.decode(b);

    RealtimeAudioIn in(RealtimeAudioFormat::Pcm24k);
    in.decode(a);
    in.set_format(RealtimeAudioFormat::Pcmu);  // 24 kHz's tail does not leak into the 8 kHz stream
    EXPECT_EQ(in.decode(b), want);

    RealtimeAudioIn kept(RealtimeAudioFormat::Pcm24k), whole(RealtimeAudioFormat::Pcm24k);
    const std::vector<uint8_t> first(a.begin(), a.begin() + 4800), second(a.begin() + 4800, a.end());
    std::vector<float> joined = kept.decode(first);
    kept.set_format(RealtimeAudioFormat::Pcm24k);  // session.update with the same format
    const std::vector<float> rest = kept.decode(second);
    joined.insert(joined.end(), rest.begin(), rest.end());
    EXPECT_EQ(joined, whole.decode(a));
}

TEST(RealtimeAudioIn, BytesThatAreNotWholeSamplesAreRefused) {
    RealtimeAudioIn in(RealtimeAudioFormat::Pcm16k);
    const std::vector<uint8_t> odd = {1, 2, 3};
    EXPECT_THROW(in.decode(odd), Error);
}

}  // namespace
}  // namespace parlance::server
