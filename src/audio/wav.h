// Minimal WAV (RIFF, 16-bit PCM) reader and mono writer, for tests, tools and speech output.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace parlance {

struct WavAudio {
    int sample_rate = 0;        // Hz
    int channels = 0;           // >= 1
    std::vector<float> samples;  // interleaved, frames * channels, each int16 value / 32768
};

// Parses a RIFF/WAVE file with 16-bit integer PCM (format tag 1, or WAVE_FORMAT_EXTENSIBLE with the
// PCM sub-format). Unknown chunks are skipped; a data chunk that claims more bytes than the file has
// (streamed WAVs write 0 or 0xFFFFFFFF there) is read to the end of the file.
// Throws Error(InvalidAudio) for anything else (not RIFF/WAVE, other sample formats, 0 channels,
// a rate outside [1000, 768000] Hz, no data chunk).
WavAudio read_wav(std::span<const uint8_t> bytes);
// Reads a file and parses it with read_wav. Throws Error(Io) if the file cannot be read.
WavAudio read_wav_file(const std::filesystem::path& path);

// Encodes mono float samples as a 16-bit PCM WAV: s = clamp(round(x * 32768), -32768, 32767), so
// read_wav(encode_wav(x)) returns x exactly when x is a multiple of 1/32768 in [-1, 32767/32768].
std::vector<uint8_t> encode_wav(std::span<const float> mono, int sample_rate);
// encode_wav to a file. Throws Error(Io) if it cannot be written.
void write_wav_file(const std::filesystem::path& path, std::span<const float> mono, int sample_rate);

}  // namespace parlance
