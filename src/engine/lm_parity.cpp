// Language-model parity (see lm_parity.h).
#include "engine/lm_parity.h"

#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "engine/generation_engine.h"

namespace parlance {

using nlohmann::json;

ParityReport run_lm_parity(LanguageModel& model, Backend& backend, const json& ref, const LmParityOptions& o) {
    ParityReport report;
    report.config = ref.value("config_name", std::string("?")) + " (" + model.architecture() + ")";
    const int stride = ref.value("logit_stride", 16);
    // One engine for every case: each request runs alone (run_to_completion), and results do not
    // depend on what the cache held before (prefix reuse and batching are invariant).
    GenerationEngine e(model, backend, {});
    for (const json& c : ref.at("cases")) {
        const std::string name = c.at("name");
        const auto prompt = c.at("prompt_ids").get<std::vector<int32_t>>();
        {
            ParityRow row;
            row.clip = name;
            row.check = "tokenizer";
            row.pass = model.tokenizer().encode(c.at("text").get<std::string>()) == prompt;
            row.detail = row.pass ? std::to_string(prompt.size()) + " ids identical" : "ids differ";
            report.rows.push_back(row);
        }
        if (c.contains("logits_strided_f64")) {
            GenerationRequest r;
            r.prompt = prompt;
            r.sampling.max_tokens = 1;
            std::vector<float> logits;
            r.on_logits = [&](std::span<const float> l) { logits.assign(l.begin(), l.end()); };
            e.submit(std::move(r));
            e.run_to_completion();
            const auto strided = c["logits_strided_f64"].get<std::vector<double>>();
            double diff = 0, scale = 0;
            for (size_t i = 0; i < strided.size(); ++i) {
                diff = std::max(diff, std::abs(logits.at(i * stride) - strided[i]));
                scale = std::max(scale, std::abs(strided[i]));
            }
            const auto top = c["top10_ids"].get<std::vector<int>>();
            const auto top_v = c["top10_logits_f64"].get<std::vector<double>>();
            for (size_t i = 0; i < top.size(); ++i) diff = std::max(diff, std::abs(logits.at(top[i]) - top_v[i]));
            ParityRow row;
            row.clip = name;
            row.check = "logits";
            row.value = scale > 0 ? diff / scale : diff;
            row.pass = row.value <= o.logits_tolerance;
            row.detail = "relative error " + format_number("%.2e", row.value) + " (last position, vs float64)";
            report.rows.push_back(row);
        }
        for (const char* which : {"greedy_fixed", "greedy_stop"}) {
            if (!c.contains(which)) continue;
            const json& g = c[which];
            GenerationRequest r;
            r.prompt = prompt;
            r.sampling.max_tokens = g.at("max_new_tokens");
            r.sampling.min_tokens = g.value("min_new_tokens", 0);
            r.sampling.stop_ids = g.at("eos_token_ids").get<std::vector<int32_t>>();
            e.submit(std::move(r));
            const GenerationResult res = e.run_to_completion().at(0);
            const auto want = g.at("ids").get<std::vector<int32_t>>();
            ParityRow row;
            row.clip = name;
            row.check = which;
            row.pass = res.tokens == want;
            size_t i = 0;
            while (i < res.tokens.size() && i < want.size() && res.tokens[i] == want[i]) ++i;
            row.value = row.pass ? -1 : static_cast<double>(i);
            const auto margins = g.value("margins", std::vector<double>{});
            row.near_tie = !row.pass && i < margins.size() && margins[i] < 1e-3;
            row.detail =
                row.pass
                    ? std::to_string(want.size()) + " ids identical"
                    : "first divergence at step " + std::to_string(i) +
                          (i < margins.size() ? " (reference margin " + format_number("%.2e", margins[i]) + ")" : "");
            report.rows.push_back(row);
        }
    }
    return report;
}

}  // namespace parlance
