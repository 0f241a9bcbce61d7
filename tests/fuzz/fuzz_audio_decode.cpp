// libFuzzer target: decode_audio on arbitrary bytes must either return finite samples or throw
// parlance::Error -- never crash, hang, leak or read out of bounds.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "audio/decode.h"
#include "core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    parlance::DecodeOptions options;
    options.max_seconds = 30.0;  // keeps each input cheap: decoding stops with TooLarge past 30 s
    try {
        const auto pcm = parlance::decode_audio(std::span<const uint8_t>(data, size), options);
        if (pcm.empty()) std::abort();  // the contract: no samples -> InvalidAudio, never an empty result
        for (float v : pcm) {
            if (std::isnan(v)) std::abort();
        }
    } catch (const parlance::Error&) {
    }
    return 0;
}
