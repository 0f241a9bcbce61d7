// A live session's audio in (see realtime_audio_in.h).
#include "server/realtime_audio_in.h"

namespace parlance::server {

RealtimeAudioIn::RealtimeAudioIn(RealtimeAudioFormat format) : format_(format) {
    set_format(format);
}

void RealtimeAudioIn::set_format(RealtimeAudioFormat format) {
    if (resampler_ && format == format_) return;
    format_ = format;
    resampler_.reset();
    if (format == RealtimeAudioFormat::Pcm24k) resampler_ = std::make_unique<Resampler>(24000, kRate);
    if (format == RealtimeAudioFormat::Pcmu || format == RealtimeAudioFormat::Pcma)
        resampler_ = std::make_unique<Resampler>(8000, kRate);
}

std::vector<float> RealtimeAudioIn::decode(std::span<const uint8_t> bytes) {
    std::vector<float> pcm, out;
    if (format_ == RealtimeAudioFormat::Pcmu || format_ == RealtimeAudioFormat::Pcma) {
        pcm = decode_pcm(bytes, format_ == RealtimeAudioFormat::Pcmu ? PcmEncoding::MuLaw : PcmEncoding::ALaw, 8000,
                         8000);
    } else {
        pcm = decode_pcm(bytes, PcmEncoding::S16LE, kRate, kRate);
    }
    if (!resampler_) return pcm;
    resampler_->push(pcm, &out);
    return out;
}

}  // namespace parlance::server
