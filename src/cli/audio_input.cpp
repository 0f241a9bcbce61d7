// Audio files named on the command line (see audio_input.h).
#include "cli/audio_input.h"

#include <cstdint>
#include <fstream>
#include <iterator>

#include "audio/decode.h"
#include "core/error.h"

namespace parlance::cli {

std::vector<float> read_audio_file(const std::string& path, int sample_rate, double max_seconds) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(ErrorKind::NotFound, "cannot read " + path);
    const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    DecodeOptions o;
    o.sample_rate = sample_rate;
    o.max_seconds = max_seconds;
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
