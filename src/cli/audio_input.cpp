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

std::vector<float> read_audio_file(const std::string& path, int sample_rate, double max_seconds) {
    DecodeOptions o;
    o.sample_rate = sample_rate;
    o.max_seconds = max_seconds;
    // A regular file is mapped, and the pages the decoder has read are dropped as it goes: the
    // peak holds the decoded audio, not the file's bytes beside it (a 2-hour WAV is 230 MB).
    // Anything else (a pipe, /dev/stdin) is read whole.
    std::unique_ptr<MappedFile> mapped;
    std::vector<uint8_t> read;
    std::span<const uint8_t> bytes;
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec)) {
        mapped = std::make_unique<MappedFile>(path);
        bytes = {mapped->data(), mapped->size()};
        constexpr size_t kBehind = size_t(1) << 20;  // a demuxer's short seeks back stay resident
        o.on_read = [&, done = size_t(0)](size_t offset) mutable {
            if (offset <= done + kBehind) return;
            mapped->release(mapped->data() + done, offset - kBehind - done);
            done = offset - kBehind;
        };
    } else {
        std::ifstream in(path, std::ios::binary);
        if (!in) throw Error(ErrorKind::NotFound, "cannot read " + path);
        read.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
        bytes = read;
    }
    std::vector<float> pcm;
    try {
        pcm = decode_audio(bytes, o);
    } catch (const Error& e) {
        throw Error(e.kind(), path + ": " + e.what());
    }
    if (pcm.empty()) throw Error(ErrorKind::InvalidAudio, path + ": the audio decodes to nothing");
    return pcm;
}

}  // namespace parlance::cli
