// chunking_strategy server_vad on the file endpoints: only the speech Silero VAD finds is decoded.
// The stretches of speech (silero-vad's get_speech_timestamps over the whole file, with the
// request's threshold, pause length and padding) are put back to back with a short pause between
// them; the transcript of that buffer is mapped back onto the file's timeline, so segment and word
// times are those of the original audio. A file with no speech is not decoded at all.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "audio/pcm_source.h"
#include "decoding/transcript.h"
#include "models/voice_activity.h"
#include "server/transcription_form.h"

namespace parlance::server {

struct SpeechOnly {
    std::vector<float> pcm;  // 16 kHz: the speech, pieces separated by kGapSeconds of silence
    struct Piece {
        double at = 0.0;       // start in `pcm`, seconds
        double from = 0.0;     // start in the original audio
        double seconds = 0.0;  // length
        size_t begin = 0, end = 0;  // its samples in the original audio
    };
    std::vector<Piece> pieces;
    static constexpr double kGapSeconds = 0.2;

    // A time of `pcm` on the original timeline (a time inside a gap: the end of the piece before).
    double original_time(double t) const;
};

SpeechOnly keep_speech(std::span<const float> pcm, VoiceActivityModel& vad, const VadChunking& chunking);

// The same for audio decoded as it is read: the VAD reads `audio` front to back (a window group
// at a time, released behind), and the pieces come back without their samples (pcm empty);
// speech_source() then reads them from a second source over the same file. A two-hour upload
// never holds more than a few minutes of decoded audio.
SpeechOnly find_speech(PcmSource& audio, VoiceActivityModel& vad, const VadChunking& chunking);
// The samples keep_speech would put in SpeechOnly::pcm, read from `audio` (a fresh source over
// the same file as find_speech read) as the model asks for them.
std::shared_ptr<PcmSource> speech_source(std::shared_ptr<PcmSource> audio, const SpeechOnly& plan);

// Moves every segment and word time of `t` (decoded from s.pcm) onto the original timeline.
void map_to_original(Transcript& t, const SpeechOnly& s);

}  // namespace parlance::server
