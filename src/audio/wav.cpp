// RIFF/WAVE parsing and writing for 16-bit PCM.
#include "audio/wav.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include "core/error.h"

namespace parlance {
namespace {

uint32_t le32(const uint8_t* p) { return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24); }
uint16_t le16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

void put32(std::vector<uint8_t>& out, uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put16(std::vector<uint8_t>& out, uint16_t v) {
    out.push_back(static_cast<uint8_t>(v));
    out.push_back(static_cast<uint8_t>(v >> 8));
}

[[noreturn]] void bad(const std::string& what) { throw Error(ErrorKind::InvalidAudio, "invalid WAV: " + what); }

}  // namespace

WavAudio read_wav(std::span<const uint8_t> bytes) {
    if (bytes.size() < 12 || std::memcmp(bytes.data(), "RIFF", 4) != 0 || std::memcmp(bytes.data() + 8, "WAVE", 4) != 0) {
        bad("not a RIFF/WAVE file");
    }
    WavAudio wav;
    bool have_fmt = false;
    size_t pos = 12;
    while (pos + 8 <= bytes.size()) {
        const uint8_t* chunk = bytes.data() + pos;
        const uint64_t size = le32(chunk + 4);
        const size_t body = pos + 8;
        const size_t left = bytes.size() - body;
        if (std::memcmp(chunk, "fmt ", 4) == 0) {
            if (size < 16 || left < 16) bad("fmt chunk too short");
            const uint8_t* f = bytes.data() + body;
            uint16_t tag = le16(f);
            const int channels = le16(f + 2);
            const uint32_t rate = le32(f + 4);
            const int bits = le16(f + 14);
            if (tag == 0xFFFE) {  // WAVE_FORMAT_EXTENSIBLE: sub-format GUID starts at offset 24
                if (size < 40 || left < 40) bad("extensible fmt chunk too short");
                tag = le16(f + 24);
            }
            if (tag != 1) bad("only integer PCM is supported (format tag " + std::to_string(tag) + ")");
            if (bits != 16) bad("only 16-bit samples are supported (got " + std::to_string(bits) + ")");
            if (channels < 1 || channels > 64) bad("channel count " + std::to_string(channels));
            if (rate < 1000 || rate > 768000) bad("sample rate " + std::to_string(rate) + " Hz");
            wav.channels = channels;
            wav.sample_rate = static_cast<int>(rate);
            have_fmt = true;
        } else if (std::memcmp(chunk, "data", 4) == 0) {
            if (!have_fmt) bad("data chunk before fmt chunk");
            const size_t n_bytes = static_cast<size_t>(std::min<uint64_t>(size, left));
            const size_t frames = n_bytes / (2 * static_cast<size_t>(wav.channels));
            wav.samples.resize(frames * static_cast<size_t>(wav.channels));
            const uint8_t* d = bytes.data() + body;
            for (size_t i = 0; i < wav.samples.size(); ++i) {
                wav.samples[i] = static_cast<float>(static_cast<int16_t>(le16(d + 2 * i))) / 32768.0f;
            }
            return wav;
        }
        pos = body + static_cast<size_t>(size) + (size & 1);  // chunks are padded to even sizes
        if (pos < body) break;  // overflow
    }
    bad(have_fmt ? "no data chunk" : "no fmt chunk");
}

WavAudio read_wav_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(ErrorKind::Io, "cannot open " + path.string());
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return read_wav(bytes);
}

std::vector<uint8_t> encode_wav(std::span<const float> mono, int sample_rate) {
    if (sample_rate < 1000 || sample_rate > 768000) {
        throw Error(ErrorKind::InvalidArgument, "WAV sample rate " + std::to_string(sample_rate) + " Hz out of range");
    }
    const uint64_t data_bytes = 2 * static_cast<uint64_t>(mono.size());
    if (data_bytes > 0xFFFFFFFFull - 36) throw Error(ErrorKind::TooLarge, "audio too long for a WAV file");
    std::vector<uint8_t> out;
    out.reserve(44 + data_bytes);
    out.insert(out.end(), {'R', 'I', 'F', 'F'});
    put32(out, static_cast<uint32_t>(36 + data_bytes));
    out.insert(out.end(), {'W', 'A', 'V', 'E', 'f', 'm', 't', ' '});
    put32(out, 16);
    put16(out, 1);  // PCM
    put16(out, 1);  // mono
    put32(out, static_cast<uint32_t>(sample_rate));
    put32(out, static_cast<uint32_t>(sample_rate) * 2);  // byte rate
    put16(out, 2);  // block align
    put16(out, 16);
    out.insert(out.end(), {'d', 'a', 't', 'a'});
    put32(out, static_cast<uint32_t>(data_bytes));
    for (float x : mono) {
        const float scaled = std::isnan(x) ? 0.0f : std::clamp(std::nearbyint(x * 32768.0f), -32768.0f, 32767.0f);
        put16(out, static_cast<uint16_t>(static_cast<int16_t>(scaled)));
    }
    return out;
}

void write_wav_file(const std::filesystem::path& path, std::span<const float> mono, int sample_rate) {
    const std::vector<uint8_t> bytes = encode_wav(mono, sample_rate);
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw Error(ErrorKind::Io, "cannot write " + path.string());
}

}  // namespace parlance
