// Audio files named on the command line (see audio_input.h).
#include "cli/audio_input.h"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <span>

#include "audio/decode.h"
#include "core/error.h"
#include "core/mapped_file.h"

namespace parlance::cli {

// A file's bytes: mapped when it is a regular file, else (a pipe, /dev/stdin) read whole.
struct AudioFile::Bytes {
    std::unique_ptr<MappedFile> mapped;
    std::vector<uint8_t> read;
    std::span<const uint8_t> bytes;
    size_t dropped = 0;  // pages before this offset were released

    explicit Bytes(const std::string& path) {
        std::error_code ec;
        if (std::filesystem::is_regular_file(path, ec)) {
            mapped = std::make_unique<MappedFile>(path);
            bytes = {mapped->data(), mapped->size()};
            return;
        }
        std::ifstream in(path, std::ios::binary);
        if (!in) throw Error(ErrorKind::NotFound, "cannot read " + path);
        read.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
        bytes = read;
    }

    // Decoding options that drop a mapped file's pages as the decoder passes them: the peak holds
    // the decoded audio, not the file's bytes beside it (a 2-hour WAV is 230 MB).
    DecodeOptions options(int sample_rate, double max_seconds) {
        DecodeOptions o;
        o.sample_rate = sample_rate;
        o.max_seconds = max_seconds;
        if (mapped) {
            constexpr size_t kBehind = size_t(1) << 20;  // a demuxer's short seeks back stay resident
            o.on_read = [this](size_t offset) {
                if (offset <= dropped + kBehind) return;
                mapped->release(mapped->data() + dropped, offset - kBehind - dropped);
                dropped = offset - kBehind;
            };
        }
        return o;
    }
};

std::vector<float> read_audio_file(const std::string& path, int sample_rate, double max_seconds) {
    AudioFile::Bytes file(path);
    std::vector<float> pcm;
    try {
        pcm = decode_audio(file.bytes, file.options(sample_rate, max_seconds));
    } catch (const Error& e) {
        throw Error(e.kind(), path + ": " + e.what());
    }
    if (pcm.empty()) throw Error(ErrorKind::InvalidAudio, path + ": the audio decodes to nothing");
    return pcm;
}

AudioFile::AudioFile(const std::string& path, int sample_rate, double max_seconds)
    : bytes_(std::make_unique<Bytes>(path)) {
    try {
        audio_ = std::make_unique<PcmSource>(
            std::make_unique<AudioStreamDecoder>(bytes_->bytes, bytes_->options(sample_rate, max_seconds)));
    } catch (const Error& e) {
        throw Error(e.kind(), path + ": " + e.what());
    }
}

AudioFile::~AudioFile() = default;

}  // namespace parlance::cli
