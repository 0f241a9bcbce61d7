// Reading an audio file named on the command line: its bytes, decoded by FFmpeg to mono float at
// the rate a model wants — whole, or as the model reads it. Errors name the file.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "audio/pcm_source.h"

namespace parlance::cli {

// Throws Error(NotFound) when the file cannot be read, the decoder's errors (InvalidAudio,
// TooLarge past max_seconds) prefixed with the path, and Error(InvalidAudio) for no samples.
std::vector<float> read_audio_file(const std::string& path, int sample_rate, double max_seconds);

// A file opened to be decoded as it is read (PcmSource): a regular file is mapped and the pages
// the decoder has passed are dropped, so neither its bytes nor its decoded audio are held whole.
class AudioFile {
public:
    // Opens and checks the file (format, audio stream, declared duration) without decoding it.
    // Throws as read_audio_file does; errors met while decoding later come from audio().fill().
    AudioFile(const std::string& path, int sample_rate, double max_seconds);
    ~AudioFile();
    PcmSource& audio() { return *audio_; }

    struct Bytes;  // the file's bytes (audio_input.cpp)

private:
    std::unique_ptr<Bytes> bytes_;
    std::unique_ptr<PcmSource> audio_;
};

}  // namespace parlance::cli
