// G.711 expansions, headerless PCM decoding and decode_rest; shared by the FFmpeg and the
// WAV-only builds.
#include "audio/decode.h"

#include <limits>
#include <new>
#include <string>

#include "audio/rate_check.h"
#include "core/error.h"

namespace parlance {

using audio_detail::check_rate;

std::vector<float> decode_rest(AudioStreamDecoder& decoder) {
    // Reserved once and filled in place: the peak is the decoded PCM itself. Untouched capacity
    // costs address space, not memory.
    std::vector<float> pcm;
    try {
        pcm.reserve(decoder.expected_samples());
    } catch (const std::bad_alloc&) {
        // No room for the address range: grow as we go.
    }
    while (decoder.decode(std::numeric_limits<size_t>::max(), &pcm)) {
    }
    return pcm;
}

int16_t mulaw_to_linear(uint8_t code) {
    const int u = ~code & 0xFF;
    const int exponent = (u >> 4) & 0x07;
    const int mantissa = u & 0x0F;
    const int magnitude = (((mantissa << 3) + 0x84) << exponent) - 0x84;
    return static_cast<int16_t>((u & 0x80) ? -magnitude : magnitude);
}

int16_t alaw_to_linear(uint8_t code) {
    const int a = code ^ 0x55;
    const int exponent = (a >> 4) & 0x07;
    const int mantissa = a & 0x0F;
    const int magnitude = exponent == 0 ? (mantissa << 4) + 8 : ((mantissa << 4) + 0x108) << (exponent - 1);
    return static_cast<int16_t>((a & 0x80) ? magnitude : -magnitude);
}

std::vector<float> decode_pcm(std::span<const uint8_t> bytes, PcmEncoding encoding, int sample_rate, int out_rate) {
    check_rate(sample_rate, "PCM sample rate", ErrorKind::InvalidArgument);
    check_rate(out_rate, "output sample rate", ErrorKind::InvalidArgument);
    std::vector<float> pcm;
    switch (encoding) {
        case PcmEncoding::S16LE:
            if (bytes.size() % 2 != 0) {
                throw Error(ErrorKind::InvalidAudio, "16-bit PCM has an odd number of bytes (" +
                                                         std::to_string(bytes.size()) + ")");
            }
            pcm.resize(bytes.size() / 2);
            for (size_t i = 0; i < pcm.size(); ++i) {
                const auto v = static_cast<int16_t>(static_cast<uint16_t>(bytes[2 * i] | (bytes[2 * i + 1] << 8)));
                pcm[i] = static_cast<float>(v) / 32768.0f;
            }
            break;
        case PcmEncoding::MuLaw:
            pcm.resize(bytes.size());
            for (size_t i = 0; i < pcm.size(); ++i) pcm[i] = static_cast<float>(mulaw_to_linear(bytes[i])) / 32768.0f;
            break;
        case PcmEncoding::ALaw:
            pcm.resize(bytes.size());
            for (size_t i = 0; i < pcm.size(); ++i) pcm[i] = static_cast<float>(alaw_to_linear(bytes[i])) / 32768.0f;
            break;
    }
    if (sample_rate == out_rate || pcm.empty()) return pcm;
    return resample(pcm, sample_rate, out_rate);
}

}  // namespace parlance
