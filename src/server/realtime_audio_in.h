// A live session's audio in (/v1/realtime input_audio_buffer.append, the base64 already decoded):
// the session's format — PCM16 at 24 kHz, at 16 kHz, or G.711 mu-law / A-law at 8 kHz — as the
// 16 kHz float samples the VAD and the model read. The resampler's state carries from one append
// to the next, so where a client cuts its chunks changes no sample.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "audio/decode.h"
#include "server/realtime_protocol.h"

namespace parlance::server {

class RealtimeAudioIn {
public:
    static constexpr int kRate = 16000;  // what comes out

    explicit RealtimeAudioIn(RealtimeAudioFormat format = RealtimeAudioFormat::Pcm24k);
    // session.update's format; a change of rate starts a new resampler.
    void set_format(RealtimeAudioFormat format);
    // One append's bytes as 16 kHz samples. Throws Error(InvalidArgument) for bytes that are not
    // whole samples of the format.
    std::vector<float> decode(std::span<const uint8_t> bytes);

private:
    RealtimeAudioFormat format_;
    std::unique_ptr<Resampler> resampler_;  // none for PCM16 at 16 kHz
};

}  // namespace parlance::server
