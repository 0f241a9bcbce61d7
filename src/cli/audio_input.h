// Reading an audio file named on the command line: its bytes, decoded by FFmpeg to mono float at
// the rate a model wants. Errors name the file.
#pragma once

#include <string>
#include <vector>

namespace parlance::cli {

// Throws Error(NotFound) when the file cannot be read, the decoder's errors (InvalidAudio,
// TooLarge past max_seconds) prefixed with the path, and Error(InvalidAudio) for no samples.
std::vector<float> read_audio_file(const std::string& path, int sample_rate, double max_seconds);

}  // namespace parlance::cli
