// The DecodeService (decoding/decode_service.h) a model's own request driver runs on: the
// generation engine. A task with a search is a search group (every live hypothesis scheduled in
// each step, beams forking KV blocks, admitted by its worst case); a task without one is a
// one-token request whose raw logits row is kept. The engine layer hands it to models through
// generation_decode_service_factory() (open_speech_model does), since models/ cannot see engine/.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "decoding/decode_service.h"
#include "engine/generation_engine.h"
#include "models/speech_model.h"

namespace parlance {

class GenerationDecodeService final : public DecodeService {
public:
    // `model`, `backend` must outlive the service.
    GenerationDecodeService(LanguageModel& model, Backend& backend, const GenerationEngineOptions& options);

    uint64_t start(DecodeTask task) override;
    void abort(uint64_t id) override { engine_.abort(id); }
    std::vector<DecodeOutcome> step() override;
    bool has_work() const override { return engine_.has_work(); }
    DecodeServiceStats stats() const override;
    int worst_blocks(int beams, int tokens) const override { return engine_.search_worst_blocks(beams, tokens); }

private:
    GenerationEngine engine_;
    std::map<SeqId, std::shared_ptr<std::vector<float>>> rows_;  // tasks without a search
    uint64_t tokens_ = 0;
};

// What EngineOptions::decode_service / SpeechModelOptions::decode_service take: a generation
// engine over the model's decoder, its KV cache of the given cap, up to max_sequences at once.
DecodeServiceFactory generation_decode_service_factory(ggml_type kv_type = GGML_TYPE_F32);

}  // namespace parlance
