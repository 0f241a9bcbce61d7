// Whisper parity against transformers reference outputs (see parity.h).
#include "models/whisper/parity.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "audio/wav.h"
#include "core/error.h"
#include "decoding/search.h"
#include "models/whisper/alignment.h"
#include "models/whisper/decoder.h"
#include "models/whisper/model.h"
#include "models/whisper/runner.h"
#include "models/whisper/transcriber.h"

namespace parlance::whisper {
namespace {

namespace fs = std::filesystem;

std::vector<float> read_f32(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(ErrorKind::NotFound, "cannot read " + path.string());
    in.seekg(0, std::ios::end);
    size_t bytes = static_cast<size_t>(in.tellg());
    in.seekg(0);
    std::vector<float> v(bytes / sizeof(float));
    in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
    return v;
}

fs::path find_clip(const fs::path& ref_dir, const std::string& name) {
    for (const fs::path& dir : {ref_dir, ref_dir.parent_path(), ref_dir.parent_path().parent_path() / "audio"}) {
        if (fs::exists(dir / name)) return dir / name;
    }
    throw Error(ErrorKind::NotFound, "reference clip " + name + " not found near " + ref_dir.string());
}

// Index of the first difference between two id sequences, or -1.
int first_divergence(const std::vector<int>& a, const std::vector<int>& b) {
    size_t n = std::min(a.size(), b.size());
    for (size_t i = 0; i < n; ++i)
        if (a[i] != b[i]) return static_cast<int>(i);
    return a.size() == b.size() ? -1 : static_cast<int>(n);
}

// The most beams any of the reference's searches takes.
int max_beams(const nlohmann::json& ref) {
    int beams = 1;
    for (const auto& clip : ref.at("clips").items())
        for (const auto& check : clip.value().items())
            if (check.value().is_object() && check.value().contains("params"))
                beams = std::max(beams, check.value().at("params").value("num_beams", 1));
    return beams;
}

// One task on `service`, stepped to its end.
DecodeOutcome run_task(DecodeService& service, DecodeTask task) {
    const uint64_t id = service.start(std::move(task));
    while (service.has_work())
        for (DecodeOutcome& o : service.step())
            if (o.id == id) return std::move(o);
    throw Error(ErrorKind::Internal, "the decode service ended a task without its outcome");
}

}  // namespace

ParityReport run_parity(const fs::path& ref_dir, const ParityOptions& options,
                        const DecodeServiceFactory& decode_service) {
    std::ifstream in(ref_dir / "reference.json");
    if (!in) throw Error(ErrorKind::NotFound, "no reference.json in " + ref_dir.string());
    nlohmann::json ref = nlohmann::json::parse(in);

    Backend backend(options.backend);
    WeightOptions wo;
    wo.quantize = options.quantize;
    const fs::path model_path =
        options.model_override.empty() ? ref_dir / ref.value("model_dir", "model") : options.model_override;
    auto model = WhisperModel::load(model_path, backend, wo);
    WhisperRunner runner(model->config, *model->weights, backend, 1);  // encodes; the alignment's pass
    WhisperDecoder decoder(*model, backend);
    std::unique_ptr<DecodeService> service =
        transcription_service(decode_service, decoder, backend, model->config, max_beams(ref));
    auto cross = std::make_shared<CrossKv>(model->config, backend);  // each clip's window in turn
    // A prompt's last logits row, computed by the service.
    auto prompt_logits = [&](std::vector<int> prompt) {
        return run_task(*service, DecodeTask{std::move(prompt), std::nullopt, -1, cross, Priority::Interactive}).logits;
    };

    ParityReport report;
    report.config = ref.value("config", ref_dir.filename().string());
    if (!options.model_override.empty()) report.config += " (model " + model_path.string() + ")";
    for (const auto& item : ref.at("clips").items()) {
        // Named copies, not structured bindings: lambdas below capture them (clang 14).
        const std::string clip = item.key();
        const nlohmann::json& c = item.value();
        std::vector<float> pcm = read_wav_file(find_clip(ref_dir, c.at("wav").get<std::string>())).samples;
        std::vector<float> mel = window_mel(*model, pcm);
        std::vector<std::vector<float>> enc;
        std::vector<CrossKv*> crosses{cross.get()};
        runner.encode(std::span<const std::vector<float>>(&mel, 1), crosses, &enc);

        // Encoder output.
        {
            std::vector<float> want = read_f32(ref_dir / c.at("encoder_output").at("file").get<std::string>());
            ParityRow row;
            row.clip = clip;
            row.check = "encoder";
            double num = 0, den = 0;
            if (want.size() != enc[0].size()) {
                row.detail = "size " + std::to_string(enc[0].size()) + " vs " + std::to_string(want.size());
            } else {
                for (size_t i = 0; i < want.size(); ++i) {
                    num += (enc[0][i] - want[i]) * double(enc[0][i] - want[i]);
                    den += double(want[i]) * want[i];
                }
                row.value = std::sqrt(num / std::max(den, 1e-30));
                row.pass = row.value <= options.encoder_tolerance;
                char buf[96];
                std::snprintf(buf, sizeof buf, "relative error %.2e (limit %.0e)", row.value,
                              options.encoder_tolerance);
                row.detail = buf;
            }
            report.rows.push_back(row);
        }
        if (options.encoder_only) continue;
        // First-step logits at probe ids.
        if (c.contains("first_step") && c.at("first_step").contains("probe_ids")) {
            const auto& fsj = c.at("first_step");
            std::vector<float> logits = prompt_logits(fsj.at("prompt_ids").get<std::vector<int>>());
            auto ids = fsj.at("probe_ids").get<std::vector<int>>();
            auto want = fsj.at("probe_logits").get<std::vector<double>>();
            ParityRow row;
            row.clip = clip;
            row.check = "first_step";
            for (size_t i = 0; i < ids.size(); ++i) row.value = std::max(row.value, std::abs(logits[ids[i]] - want[i]));
            row.pass = row.value <= 1e-3 * std::max(1.0, fsj.value("std", 1.0));
            char buf[96];
            std::snprintf(buf, sizeof buf, "max |logit diff| %.2e over %zu probes", row.value, ids.size());
            row.detail = buf;
            report.rows.push_back(row);
        }
        // Token sequences.
        auto compare_ids = [&](const std::string& name, const nlohmann::json& cj, bool timestamps,
                               const std::vector<int>& want_ids, const std::vector<double>& margins) {
            const auto& p = cj.at("params");
            std::vector<int> prompt = cj.at("prompt_ids").get<std::vector<int>>();
            SearchOptions so;
            so.max_new_tokens = p.value("max_new_tokens", 24);
            so.eos = model->tokens.eot;
            so.num_beams = p.value("num_beams", 1);
            int min_new = p.contains("min_new_tokens") && p.at("min_new_tokens").is_number()
                              ? p.at("min_new_tokens").get<int>()
                              : 0;
            so.processors = whisper_processors(*model, static_cast<int>(prompt.size()), timestamps, min_new);
            std::vector<int> got =
                run_task(*service, DecodeTask{prompt, std::move(so), -1, cross, Priority::Interactive}).result.tokens;
            ParityRow row;
            row.clip = clip;
            row.check = name;
            int div = first_divergence(got, want_ids);
            row.value = div;
            row.pass = div < 0;
            if (div >= 0 && div < static_cast<int>(margins.size()) && margins[div] < 1e-3) row.near_tie = true;
            row.detail = std::to_string(got.size()) + " tokens" +
                         (div < 0 ? ", identical" : ", first divergence at step " + std::to_string(div));
            report.rows.push_back(row);
        };
        for (const char* name : {"greedy_fixed", "greedy_stop", "beam", "beam_stop"}) {
            if (!c.contains(name) || c.at(name).value("status", "") != "ok") continue;
            const auto& cj = c.at(name);
            std::vector<double> margins;
            if (cj.contains("step_margins"))
                for (const auto& m : cj.at("step_margins")) margins.push_back(m.is_number() ? m.get<double>() : 1e9);
            compare_ids(name, cj, false, cj.at("generated_ids").get<std::vector<int>>(), margins);
        }
        if (c.contains("timestamps") && c.at("timestamps").value("status", "") == "ok") {
            const auto& call = c.at("timestamps").at("calls").at(0);
            std::vector<double> margins;
            for (const auto& m : call.at("step_margins")) margins.push_back(m.is_number() ? m.get<double>() : 1e9);
            nlohmann::json cj = c.at("timestamps");
            cj["prompt_ids"] = call.at("decoder_input_ids");
            compare_ids("timestamps", cj, true, call.at("generated_ids").get<std::vector<int>>(), margins);
        }
        // Token timestamps from cross-attention + DTW, on the reference's own sequence (so the
        // row measures the alignment alone; the decoding rows above cover the tokens).
        for (const char* name : {"word_timestamps", "word_timestamps_cropped"}) {
            if (!c.contains(name) || c.at(name).value("status", "") != "ok") continue;
            const auto& cj = c.at(name);
            const auto& p = cj.at("params");
            std::vector<int> seq = cj.at("sequences").get<std::vector<int>>();
            std::vector<double> want = cj.at("token_timestamps").get<std::vector<double>>();
            std::vector<std::pair<int, int>> heads;
            for (const auto& lh : p.at("alignment_heads")) heads.emplace_back(lh.at(0).get<int>(), lh.at(1).get<int>());
            AlignmentOptions ao;
            ao.median_filter_width = p.value("median_filter_width", 7);
            ao.time_precision = p.value("time_precision", 0.02);
            // transformers 5.17 drops `num_frames` on this path (generate pops it into the
            // generation config, but the short-form call computes the timestamps without it): its
            // cropped outputs equal the uncropped ones, which a crop to num_frames / 2 frames
            // could not produce (e.g. 29.98 s for a 1100-frame clip). We match that: no crop here;
            // the crop itself is unit-tested and used by transcription.
            ao.num_frames = 0;
            ParityRow row;
            row.clip = clip;
            row.check = name;
            if (seq.size() < 2 || want.size() != seq.size()) {
                row.detail = "reference has " + std::to_string(want.size()) + " timestamps for " +
                             std::to_string(seq.size()) + " tokens";
                report.rows.push_back(row);
                continue;
            }
            std::span<const int> rows_in(seq.data(), seq.size() - 1);
            auto weights = runner.cross_attention(*cross, 0, rows_in, heads);
            const int prompt_len = static_cast<int>(cj.at("prompt_ids").size());
            std::vector<float> got = token_timestamps(weights, static_cast<int>(rows_in.size()),
                                                      model->config.max_source_positions, prompt_len, ao);
            double max_diff = 0.0;
            int first_bad = -1;
            for (size_t i = 0; i < want.size(); ++i) {
                double d = std::abs(double(got[i]) - want[i]);
                if (d > 1e-6 && first_bad < 0) first_bad = static_cast<int>(i);
                max_diff = std::max(max_diff, d);
            }
            row.value = max_diff;
            row.pass = first_bad < 0;
            char buf[160];
            if (row.pass)
                std::snprintf(buf, sizeof buf, "%zu timestamps, max |diff| %.1e s", want.size(), max_diff);
            else
                std::snprintf(buf, sizeof buf, "%zu timestamps, first differs at %d (%.2f vs %.2f), max |diff| %.2f s",
                              want.size(), first_bad, got[first_bad], want[first_bad], max_diff);
            row.detail = buf;
            report.rows.push_back(row);
        }
        if (c.contains("language") && c.at("language").value("status", "") == "ok") {
            std::vector<float> logits = prompt_logits({model->tokens.sot});
            auto probs = language_probabilities(logits, model->tokens);
            std::string best;
            float bp = -1;
            for (const auto& [code, p] : probs)
                if (p > bp) {
                    bp = p;
                    best = code;
                }
            ParityRow row;
            row.clip = clip;
            row.check = "language";
            std::string want = c.at("language").at("detected").get<std::string>();
            row.pass = "<|" + best + "|>" == want || best == want;
            double want_p = c.at("language").at("top5").at(0).at("prob").get<double>();
            row.value = std::abs(bp - want_p);
            char buf[128];
            std::snprintf(buf, sizeof buf, "%s p=%.4f (reference %s p=%.4f)", best.c_str(), bp, want.c_str(), want_p);
            row.detail = buf;
            report.rows.push_back(row);
        }
    }
    return report;
}

}  // namespace parlance::whisper
