// `parlance vad FILE`: speech segments of a recording by Silero VAD v5 (start and end in
// seconds), or with --frames the per-window speech probabilities.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/audio_input.h"
#include "cli/commands.h"
#include "cli/default_model.h"
#include "core/backend.h"
#include "core/error.h"
#include "models/registry.h"
#include "models/voice_activity.h"

namespace parlance::cli {
namespace {

struct VadArgs {
    std::string file;
    std::string vad_model;
    std::string format = "text";
    int sample_rate = 16000;
    bool frames = false;
    double max_seconds = 4 * 3600;
    SpeechSegmentOptions segments;
    int threads = 0;
};

void run(VadArgs& a) {
    if (a.format != "text" && a.format != "json")
        throw Error(ErrorKind::InvalidArgument, "--format is text or json, not '" + a.format + "'");
    if (!(a.segments.threshold > 0.0f && a.segments.threshold < 1.0f))
        throw Error(ErrorKind::InvalidArgument, "--threshold must be between 0 and 1");
    BackendOptions bo;
    bo.threads = a.threads;
    Backend backend(bo);
    const std::unique_ptr<VoiceActivityModel> model =
        load_voice_activity_model(resolve_vad_model(a.vad_model), backend);
    VoiceActivityModel& vad = *model;
    const int window = vad.window_samples(a.sample_rate);  // 16000 or 8000 for Silero, else the reason
    // Decoded as the model reads it: a two-hour file holds a few minutes of samples at a time.
    AudioFile file(a.file, a.sample_rate, a.max_seconds);
    const std::vector<float> probs = vad.probabilities(file.audio(), a.sample_rate);
    const size_t total = file.audio().decoded();
    const double window_s = static_cast<double>(window) / a.sample_rate;
    if (a.frames) {
        // A JSON array of probabilities, one per window (window_s apart), whatever --format says.
        std::printf("%s\n", nlohmann::json(probs).dump().c_str());
        return;
    }
    const auto segs = speech_segments(probs, window, a.sample_rate, total, a.segments);
    if (a.format == "json") {
        nlohmann::json j{{"duration", static_cast<double>(total) / a.sample_rate},
                         {"sample_rate", a.sample_rate},
                         {"window_seconds", window_s},
                         {"threshold", a.segments.threshold},
                         {"segments", nlohmann::json::array()}};
        for (const auto& s : segs) j["segments"].push_back({{"start", s.start}, {"end", s.end}});
        std::printf("%s\n", j.dump(2).c_str());
        return;
    }
    for (const auto& s : segs) std::printf("%.3f\t%.3f\n", s.start, s.end);
}

}  // namespace

void register_vad(CLI::App& app, GlobalOptions&) {
    auto a = std::make_shared<VadArgs>();
    auto* cmd = app.add_subcommand("vad",
                                   "Find the speech in a recording with Silero VAD v5 (start and end of each "
                                   "segment, in seconds)");
    cmd->add_option("file", a->file, "Audio file (any format FFmpeg reads)")->required();
    cmd->add_option("--vad-model", a->vad_model,
                    "silero_vad_v5.onnx (default: $PARLANCE_VAD_MODEL, else where scripts/setup.sh put it)");
    cmd->add_option("--threshold", a->segments.threshold, "Speech starts at a window with this probability")
        ->default_val(0.5);
    cmd->add_option("--min-speech-ms", a->segments.min_speech_ms, "Shorter segments are dropped")->default_val(250);
    cmd->add_option("--min-silence-ms", a->segments.min_silence_ms, "A pause this long ends a segment")
        ->default_val(100);
    cmd->add_option("--speech-pad-ms", a->segments.speech_pad_ms, "Padding on both sides of a segment")
        ->default_val(30);
    cmd->add_option("--sample-rate", a->sample_rate, "Run the model at 16000 (512-sample windows) or 8000 Hz (256)")
        ->default_val(16000);
    cmd->add_option("--format", a->format, "text (start<TAB>end per line) or json")->default_val("text");
    cmd->add_flag("--frames", a->frames, "Print the per-window speech probabilities as a JSON array instead");
    cmd->add_option("-t,--threads", a->threads, "CPU threads (0 = all, up to 8)");
    cmd->callback([a] { run(*a); });
}

}  // namespace parlance::cli
