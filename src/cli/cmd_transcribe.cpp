// `parlance transcribe FILE... --model PATH`: decodes each file (any format FFmpeg reads),
// transcribes it with Whisper and writes json, text, srt, vtt or verbose_json to stdout or -o.
// A progress bar goes to stderr when stderr is a terminal.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "cli/audio_input.h"
#include "cli/commands.h"
#include "cli/default_model.h"
#include "core/error.h"
#include "decoding/transcript.h"
#include "engine/lm_speech_model.h"

namespace parlance::cli {
namespace {

struct TranscribeArgs {
    std::vector<std::string> files;
    std::string model;
    std::string format = "text";
    std::string output;
    std::string device = "cpu";
    std::string quantize;
    std::string mmproj;
    double audio_window = 0;
    std::string kv_cache_type = "f32";
    int threads = 0;
    double max_seconds = 4 * 3600;
    TranscribeOptions options;
    float temperature = -1.0f;
    bool no_timestamps = false;
    bool timings = false;
};

// One line to stderr: where a file's time went (benchmarks read it; bench/qwen3_asr_bench.sh).
void print_timings(const std::string& file, const TranscribeTimings& t) {
    const auto ms = [](double s) { return s * 1000.0; };
    std::fprintf(stderr,
                 "timings %s: log-mel %.1f ms, encode %.1f ms, prefill %d tokens %.1f ms, decode %d tokens %.1f ms "
                 "(%.2f ms/token)\n",
                 file.c_str(), ms(t.features), ms(t.encode), t.prefill_tokens, ms(t.prefill), t.decode_tokens,
                 ms(t.decode), t.decode_tokens > 0 ? ms(t.decode) / t.decode_tokens : 0.0);
}

// CLI11 validators ("" when the value is good). strtof reads as CLI11 will; NaN is refused
// (every comparison with it is false, so it would turn the gate off unnoticed).
std::string check_number(const std::string& value, float* x) {
    char* end = nullptr;
    *x = std::strtof(value.c_str(), &end);
    if (end == value.c_str() || *end != '\0' || std::isnan(*x)) return "not a number: " + value;
    return {};
}

std::string check_probability(std::string& value) {
    float x = 0.0f;
    std::string error = check_number(value, &x);
    if (error.empty() && (x < 0.0f || x > 1.0f)) error = "a probability is in [0, 1], got " + value;
    return error;
}

std::string check_log_probability(std::string& value) {
    float x = 0.0f;
    std::string error = check_number(value, &x);
    if (error.empty() && x > 0.0f) error = "a log-probability threshold is at most 0, got " + value;
    return error;
}

void run(TranscribeArgs& a) {
    a.model = resolve_model(a.model);
    ResponseFormat format = parse_response_format(a.format);
    if (a.temperature >= 0.0f) a.options.temperatures = {a.temperature};
    a.options.timestamps = !a.no_timestamps || format == ResponseFormat::Srt || format == ResponseFormat::Vtt ||
                           format == ResponseFormat::VerboseJson;

    BackendOptions bo;
    bo.device = a.device;
    bo.threads = a.threads;
    Backend backend(bo);
    auto model =
        open_speech_model(a.model, backend, {a.quantize, a.mmproj, a.audio_window, kv_cache_type_of(a.kv_cache_type)});
    const bool tty = isatty(fileno(stderr));
    std::fprintf(stderr, "loaded %s (%s) in %.2f s on %s, %d threads\n", a.model.c_str(), model->description().c_str(),
                 model->load_seconds(), backend.device_name().c_str(), backend.threads());

    std::FILE* out = stdout;
    if (!a.output.empty()) {
        out = std::fopen(a.output.c_str(), "wb");
        if (!out) throw Error(ErrorKind::Io, "cannot write " + a.output);
    }
    for (const std::string& file : a.files) {
        // Decoded as the model reads it: a window or a piece ahead, never the whole file.
        AudioFile audio(file, 16000, a.max_seconds);
        TranscribeOptions o = a.options;
        if (tty) {
            o.progress = [&](double done, double total) {
                if (total < done) total = done;  // a file that declares no duration, or less than it has
                int width = 30, filled = total > 0 ? static_cast<int>(width * done / total) : width;
                std::fprintf(stderr, "\r%s [%.*s%*s] %5.1f / %.1f s", file.c_str(), filled,
                             "##############################", width - filled, "", done, total);
                std::fflush(stderr);
            };
        }
        Transcript t;
        try {
            t = model->transcribe(audio.audio(), o);
        } catch (const Error& e) {
            if (e.kind() != ErrorKind::InvalidAudio && e.kind() != ErrorKind::TooLarge) throw;
            throw Error(e.kind(), file + ": " + e.what());  // met while decoding
        }
        if (tty) std::fprintf(stderr, "\n");
        if (a.timings) print_timings(file, t.timings);
        if (a.files.size() > 1 && format == ResponseFormat::Text) std::fprintf(out, "== %s\n", file.c_str());
        std::string rendered = render_transcript(t, format, true, a.options.word_timestamps);
        std::fwrite(rendered.data(), 1, rendered.size(), out);
    }
    if (out != stdout) std::fclose(out);
}

}  // namespace

void register_transcribe(CLI::App& app, GlobalOptions&) {
    auto a = std::make_shared<TranscribeArgs>();
    auto* cmd = app.add_subcommand("transcribe", "Transcribe or translate audio files with a Whisper model");
    cmd->add_option("files", a->files, "Audio files (wav, flac, mp3, m4a, ogg, webm, ...)")->required();
    cmd->add_option("-m,--model", a->model, kSpeechModelHelp);
    cmd->add_option("--mmproj", a->mmproj, kMmprojHelp);
    cmd->add_option("--audio-window", a->audio_window, kAudioWindowHelp)->type_name("S");
    cmd->add_option("--kv-cache-type", a->kv_cache_type, kKvCacheTypeHelp)
        ->default_val("f32")
        ->check(CLI::IsMember({"f32", "f16"}));
    cmd->add_option("-f,--format", a->format, "json|text|srt|vtt|verbose_json")->default_val("text");
    cmd->add_option("-o,--output", a->output, "Write here instead of stdout");
    cmd->add_option("-l,--language", a->options.language, "Spoken language code (default: detect)");
    cmd->add_option("--task", a->options.task, "transcribe|translate")->default_val("transcribe");
    cmd->add_option_function<int>(
        "--beam-size", [a](int n) { a->options.beam_size = n; },
        "Beams (1 = greedy; default: the model's generation_config.json num_beams, else 1)");
    cmd->add_option("--temperature", a->temperature, "Fixed sampling temperature (default: 0 with fallback 0.2..1.0)");
    cmd->add_option("--prompt", a->options.initial_prompt, "Initial prompt (vocabulary, style)");
    cmd->add_flag("--no-timestamps", a->no_timestamps, "Do not predict timestamps (text and json only)");
    cmd->add_flag("--word-timestamps", a->options.word_timestamps,
                  "Time each word by cross-attention alignment (verbose_json gets a words array)");
    cmd->add_flag_callback(
        "--condition-on-previous-text", [a] { a->options.condition_on_previous_text = true; },
        "Prompt each 30 s window with the text before it (default: the model's "
        "generation_config.json, else on)");
    cmd->add_flag_callback(
        "--no-condition-on-previous-text", [a] { a->options.condition_on_previous_text = false; },
        "Decode each window without the text before it");
    cmd->add_option("--max-new-tokens", a->options.max_new_tokens, "Tokens per 30 s window (Qwen3-ASR: per piece)")
        ->default_val(224);
    cmd->add_option(
           "--min-new-tokens", a->options.min_new_tokens,
           "End-of-text suppressed until this many tokens per window or piece (as transformers' min_new_tokens)")
        ->default_val(0);
    // OpenAI whisper's gate and fallback thresholds (its CLI's names, hyphenated).
    cmd->add_option("--no-speech-threshold", a->options.no_speech_threshold,
                    "A window is silent (no text) when the probability of <|nospeech|> exceeds "
                    "this and its average log-probability is below --logprob-threshold; 1: no gate")
        ->default_val(0.6f)
        ->check(CLI::Validator(check_probability, "[0, 1]"));
    cmd->add_option("--logprob-threshold", a->options.logprob_threshold,
                    "Average token log-probability under which a window is decoded again at the "
                    "next temperature (unless --temperature fixes one) and, with <|nospeech|> "
                    "above --no-speech-threshold, counts as silent; =-inf: never")
        ->default_val(-1.0f)
        ->check(CLI::Validator(check_log_probability, "<= 0"));
    cmd->add_flag("--timings", a->timings,
                  "Print where each file's time went to stderr: log-mel, encoder, prompt steps, decode ms/token");
    cmd->add_option("-t,--threads", a->threads, "CPU threads (0 = all, up to 8)");
    cmd->add_option("--device", a->device, "cpu|cuda|metal")->default_val("cpu");
    add_deterministic_flag(cmd);
    cmd->add_option("--quantize", a->quantize,
                    "Linear weights at load: f32 (full precision) or quantized f16|q8_0|q5_k|q4_k");
    cmd->add_option("--max-seconds", a->max_seconds, "Refuse audio longer than this")->default_val(4 * 3600);
    cmd->callback([a] { run(*a); });
}

}  // namespace parlance::cli
