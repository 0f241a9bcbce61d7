// Audio language model parity (see audio_lm_parity.h).
#include "engine/audio_lm_parity.h"

#include <cmath>
#include <cstdio>
#include <tuple>

#include "audio/wav.h"
#include "core/error.h"
#include "engine/generation_engine.h"

namespace parlance {
namespace {

using nlohmann::json;

// The case's samples: `samples` from `first_sample` of the file, the file's span repeated.
std::vector<float> clip_samples(const json& c, const std::filesystem::path& audio_dir) {
    const std::vector<float> pcm = read_wav_file(audio_dir / c.at("file").get<std::string>()).samples;
    const size_t first = c.at("first_sample"), repeats = c.value("repeats", 1);
    const size_t n = c.at("samples").get<size_t>() / repeats;
    if (first + n > pcm.size())
        throw Error(ErrorKind::InvalidArgument, "reference case " + c.at("name").get<std::string>() +
                                                    " reads past the end of " + c.at("file").get<std::string>());
    std::vector<float> out;
    for (size_t r = 0; r < repeats; ++r) out.insert(out.end(), pcm.begin() + first, pcm.begin() + first + n);
    return out;
}

}  // namespace

ParityReport run_audio_lm_parity(AudioLanguageModel& model, Backend& backend, const json& ref,
                                 const std::filesystem::path& audio_dir, const AudioLmParityOptions& o) {
    ParityReport report;
    report.config = ref.value("config_name", std::string("?")) + " (" + model.description() + ")";
    const int stride = ref.value("logit_stride", 64);
    GenerationEngine e(model.decoder(), backend, {});
    for (const json& c : ref.at("cases")) {
        const std::string name = c.at("name");
        auto add = [&](const std::string& check, bool pass, double value, std::string detail) {
            report.rows.push_back({name, check, pass, false, value, std::move(detail)});
        };
        int n_audio = 0;
        const std::vector<float> emb = model.embed_audio(clip_samples(c, audio_dir), &n_audio);
        const int want_audio = c.at("audio_tokens");
        add("audio_tokens", n_audio == want_audio, n_audio,
            std::to_string(n_audio) + " audio embeddings (reference " + std::to_string(want_audio) + ")");
        // The three prompts the reference decodes from.
        struct Prompt {
            std::vector<int32_t> ids;
            int audio_at = -1;
        };
        Prompt detected, english, context;
        detected.ids = model.prompt(n_audio, "", "", &detected.audio_at);
        english.ids = model.prompt(n_audio, "", model.language_code("en"), &english.audio_at);
        context.ids = model.prompt(n_audio, c.at("greedy_context").at("context"), "", &context.audio_at);
        for (const auto& [check, p, want] :
             {std::tuple{"prompt", &detected, c.at("prompt_ids")},
              std::tuple{"prompt_forced_english", &english, c.at("greedy_forced_english").at("prompt_ids")},
              std::tuple{"prompt_context", &context, c.at("greedy_context").at("prompt_ids")}}) {
            const bool same = p->ids == want.get<std::vector<int32_t>>();
            add(check, same, 0, same ? std::to_string(p->ids.size()) + " ids identical" : "ids differ");
        }
        // A divergence is a near-tie (accepted) where the reference's top-2 margin is within twice
        // the measured logit error: either token is right at this precision (the features differ
        // from torch's float32 STFT by up to 3e-5, which random layers amplify).
        double tie = 0.0;
        for (const char* which : {"greedy_auto", "greedy_forced_english", "greedy_context", "greedy_stop"}) {
            const std::string w = which;
            const json& g = c.at(which);
            const Prompt& p = w == "greedy_forced_english" ? english : w == "greedy_context" ? context : detected;
            GenerationRequest r;
            r.prompt = p.ids;
            r.spans.push_back({p.audio_at, n_audio, emb});
            r.cache_key = embedding_cache_key(emb);
            r.sampling.max_tokens = g.at("max_new_tokens");
            r.sampling.min_tokens = w == "greedy_stop" ? 0 : r.sampling.max_tokens;
            r.sampling.stop_ids =
                w == "greedy_stop" ? g.at("eos_token_ids").get<std::vector<int32_t>>() : model.decoder().stop_ids();
            std::vector<float> first;
            r.on_logits = [&](std::span<const float> l) {
                if (first.empty()) first.assign(l.begin(), l.end());
            };
            e.submit(std::move(r));
            const GenerationResult out = e.run_to_completion().at(0);
            if (w == "greedy_auto") {
                const auto strided = c.at("logits_strided_f64").get<std::vector<double>>();
                double diff = 0, scale = 0;
                for (size_t i = 0; i < strided.size(); ++i) {
                    diff = std::max(diff, std::abs(first.at(i * stride) - strided[i]));
                    scale = std::max(scale, std::abs(strided[i]));
                }
                const auto top = c.at("top10_ids").get<std::vector<int>>();
                const auto top_v = c.at("top10_logits_f64").get<std::vector<double>>();
                for (size_t i = 0; i < top.size(); ++i) diff = std::max(diff, std::abs(first.at(top[i]) - top_v[i]));
                const double rel = scale > 0 ? diff / scale : diff;
                add("logits", rel <= o.logits_tolerance, rel,
                    "relative error " + format_number("%.2e", rel) + " (last prompt position, vs float64)");
                tie = 2.0 * diff;
            }
            const auto want = g.at("ids").get<std::vector<int32_t>>();
            const auto margins = g.value("margins", std::vector<double>{});
            size_t k = 0;
            while (k < out.tokens.size() && k < want.size() && out.tokens[k] == want[k]) ++k;
            ParityRow row{name, w, out.tokens == want, false, -1, ""};
            if (row.pass) {
                row.detail = std::to_string(want.size()) + " ids identical";
            } else {
                row.value = static_cast<double>(k);
                row.near_tie = k < margins.size() && margins[k] < tie;
                row.pass = row.near_tie;
                row.detail = "first divergence at step " + std::to_string(k) +
                             (k < margins.size() ? " (reference margin " + format_number("%.2e", margins[k]) +
                                                       ", near-tie bound " + format_number("%.2e", tie) + ")"
                                                 : "");
            }
            report.rows.push_back(row);
        }
    }
    return report;
}

}  // namespace parlance
