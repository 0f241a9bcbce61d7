// Greedy and beam search (see search.h).
#include "decoding/search.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "core/error.h"

namespace parlance {
namespace {

class GreedySearch : public Search {
public:
    GreedySearch(std::vector<int> prompt, int slot, const SearchOptions& o, int cached)
        : seq_(std::move(prompt)), prompt_len_(static_cast<int>(seq_.size())), slot_(slot), o_(o),
          n_cached_(cached), rng_(o.seed) {
        if (seq_.empty() || cached >= prompt_len_)
            throw Error(ErrorKind::Internal, "greedy search needs uncached prompt tokens");
    }

    std::vector<StepInput> inputs() override {
        if (done_) return {};
        StepInput in;
        in.slot = slot_;
        in.n_past = n_cached_;
        in.tokens.assign(seq_.begin() + n_cached_, seq_.end());
        return {in};
    }

    void consume(std::span<std::vector<float>> logits, StepModel&) override {
        n_cached_ = static_cast<int>(seq_.size());
        std::vector<float>& l = logits[0];
        apply_processors(o_.processors, l, seq_, prompt_len_);
        if (o_.record_margins) result_.margins.push_back(top2_margin(l));
        int next = o_.temperature > 0.0f ? sample(l) : argmax(l);
        std::vector<float> lp = l;
        log_softmax(lp);
        result_.sum_logprob += lp[next];
        seq_.push_back(next);
        result_.tokens.push_back(next);
        if (next == o_.eos) {
            result_.finished = true;
            done_ = true;
        } else if (static_cast<int>(result_.tokens.size()) >= o_.max_new_tokens) {
            done_ = true;
        }
        result_.score = result_.sum_logprob;
    }

    bool done() const override { return done_; }
    SearchResult result() const override { return result_; }

private:
    int sample(std::span<const float> logits) {
        std::vector<double> p(logits.size());
        float m = kNegInf;
        for (float v : logits) m = std::max(m, v);
        double total = 0.0;
        for (size_t i = 0; i < p.size(); ++i) {
            p[i] = logits[i] == kNegInf ? 0.0 : std::exp((logits[i] - m) / o_.temperature);
            total += p[i];
        }
        std::uniform_real_distribution<double> u(0.0, total);
        double r = u(rng_), acc = 0.0;
        for (size_t i = 0; i < p.size(); ++i) {
            acc += p[i];
            if (r < acc && p[i] > 0.0) return static_cast<int>(i);
        }
        return argmax(logits);
    }

    std::vector<int> seq_;
    int prompt_len_;
    int slot_;
    SearchOptions o_;
    int n_cached_ = 0;
    std::mt19937_64 rng_;
    bool done_ = false;
    SearchResult result_;
};

// Beam search after transformers' vectorised implementation: per step, log-softmax, processors,
// add beam scores, take the top 2*num_beams candidates; candidates ending in eos within the top
// num_beams become finished hypotheses scored sum/len^penalty; the best num_beams others go on.
class BeamSearch : public Search {
public:
    BeamSearch(std::vector<int> prompt, std::vector<int> slots, const SearchOptions& o, int cached)
        : prompt_len_(static_cast<int>(prompt.size())), slots_(std::move(slots)), o_(o) {
        if (static_cast<int>(slots_.size()) < 2 * o_.num_beams)
            throw Error(ErrorKind::Internal, "beam search needs 2 * num_beams cache slots");
        // The first step runs the prompt once; all beams start from it.
        Beam b;
        b.seq = std::move(prompt);
        b.slot = slots_[0];
        b.n_cached = cached;
        beams_.push_back(std::move(b));
    }

    std::vector<StepInput> inputs() override {
        std::vector<StepInput> out;
        if (done_) return out;
        for (const Beam& b : beams_) {
            StepInput in;
            in.slot = b.slot;
            in.n_past = b.n_cached;
            in.tokens.assign(b.seq.begin() + b.n_cached, b.seq.end());
            out.push_back(std::move(in));
        }
        return out;
    }

    void consume(std::span<std::vector<float>> logits, StepModel& model) override {
        const int V = static_cast<int>(logits[0].size());
        const int k = 2 * o_.num_beams;
        struct Cand {
            float score;
            int beam;
            int token;
            float token_logprob;
        };
        std::vector<Cand> cands;
        for (size_t bi = 0; bi < beams_.size(); ++bi) {
            Beam& b = beams_[bi];
            b.n_cached = static_cast<int>(b.seq.size());
            std::vector<float>& l = logits[bi];
            log_softmax(l);
            apply_processors(o_.processors, l, b.seq, prompt_len_);
            // Keep this beam's best k (enough for the global top k).
            std::vector<int> idx(V);
            std::iota(idx.begin(), idx.end(), 0);
            std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int a, int c) {
                return l[a] > l[c] || (l[a] == l[c] && a < c);
            });
            for (int j = 0; j < k; ++j)
                cands.push_back({static_cast<float>(b.sum + l[idx[j]]), static_cast<int>(bi), idx[j], l[idx[j]]});
        }
        std::stable_sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& c) {
            return a.score > c.score;
        });
        cands.resize(std::min<size_t>(cands.size(), k));

        const int gen_len = static_cast<int>(beams_[0].seq.size()) - prompt_len_ + 1;
        const bool last_step = gen_len >= o_.max_new_tokens;
        std::vector<Beam> next;
        for (int rank = 0; rank < static_cast<int>(cands.size()); ++rank) {
            const Cand& c = cands[rank];
            if (c.score == kNegInf) continue;
            const Beam& parent = beams_[c.beam];
            if (c.token == o_.eos || last_step) {
                // At the length limit every candidate stops; only the top num_beams count.
                if (rank < o_.num_beams) add_finished(parent, c.token, c.score, c.token == o_.eos);
                continue;
            }
            if (static_cast<int>(next.size()) >= o_.num_beams) continue;
            Beam nb;
            nb.seq = parent.seq;
            nb.seq.push_back(c.token);
            nb.sum = c.score;
            nb.parent_slot = parent.slot;
            nb.n_cached = parent.n_cached;
            next.push_back(std::move(nb));
        }
        if (last_step) {
            done_ = true;
            return;
        }
        // Move the surviving beams into the half of the slots not used by their parents.
        half_ ^= 1;
        for (size_t i = 0; i < next.size(); ++i) {
            next[i].slot = slots_[half_ * o_.num_beams + i];
            model.copy_slot(next[i].parent_slot, next[i].slot, next[i].n_cached);
        }
        beams_ = std::move(next);
        if (beams_.empty()) {
            done_ = true;
            return;
        }
        // Stop when no running beam can beat the worst kept hypothesis (early_stopping=False).
        if (static_cast<int>(finished_.size()) >= o_.num_beams) {
            const int cur_len = static_cast<int>(beams_[0].seq.size()) - prompt_len_;
            double best_running = beams_[0].sum / std::pow(static_cast<double>(cur_len), o_.length_penalty);
            if (worst_finished() >= best_running) done_ = true;
        }
    }

    bool done() const override { return done_; }

    SearchResult result() const override {
        SearchResult r;
        if (finished_.empty()) return r;
        const Hyp* best = &finished_[0];
        for (const Hyp& h : finished_)
            if (h.score > best->score) best = &h;
        r.tokens.assign(best->seq.begin() + prompt_len_, best->seq.end());
        r.sum_logprob = best->sum;
        r.score = best->score;
        r.finished = best->eos;
        return r;
    }

private:
    struct Beam {
        std::vector<int> seq;
        double sum = 0.0;
        int slot = 0;
        int parent_slot = 0;
        int n_cached = 0;
    };
    struct Hyp {
        std::vector<int> seq;
        double sum;
        double score;
        bool eos;
    };

    void add_finished(const Beam& parent, int token, double sum, bool eos) {
        Hyp h;
        h.seq = parent.seq;
        h.seq.push_back(token);
        h.sum = sum;
        const int len = static_cast<int>(h.seq.size()) - prompt_len_;
        h.score = sum / std::pow(static_cast<double>(len), o_.length_penalty);
        h.eos = eos;
        insert(std::move(h));
    }
    void insert(Hyp h) {
        finished_.push_back(std::move(h));
        if (static_cast<int>(finished_.size()) > o_.num_beams) {
            auto worst = std::min_element(finished_.begin(), finished_.end(),
                                          [](const Hyp& a, const Hyp& b) { return a.score < b.score; });
            finished_.erase(worst);
        }
    }
    double worst_finished() const {
        double w = finished_[0].score;
        for (const Hyp& h : finished_) w = std::min(w, h.score);
        return w;
    }

    int prompt_len_;
    std::vector<int> slots_;
    SearchOptions o_;
    std::vector<Beam> beams_;
    std::vector<Hyp> finished_;
    int half_ = 0;
    bool done_ = false;
};

}  // namespace

bool is_beam_search(const SearchOptions& options) {
    return search_sequences(options) > 1;
}

int search_sequences(const SearchOptions& options) {
    return search_sequences(options.num_beams, options.temperature);
}

int search_sequences(int num_beams, float temperature) {
    return num_beams > 1 && temperature <= 0.0f ? 2 * num_beams : 1;
}

std::unique_ptr<Search> make_search(std::vector<int> prompt, std::vector<int> slots,
                                    const SearchOptions& options, int cached) {
    if (!is_beam_search(options)) {
        if (slots.empty()) throw Error(ErrorKind::Internal, "greedy search needs one cache slot");
        return std::make_unique<GreedySearch>(std::move(prompt), slots[0], options, cached);
    }
    return std::make_unique<BeamSearch>(std::move(prompt), std::move(slots), options, cached);
}

void run_searches(StepModel& model, std::span<Search* const> searches) {
    for (;;) {
        std::vector<StepInput> batch;
        std::vector<std::pair<Search*, size_t>> owners;  // search, number of inputs
        for (Search* s : searches) {
            if (s->done()) continue;
            auto in = s->inputs();
            if (in.empty()) continue;
            owners.emplace_back(s, in.size());
            for (auto& i : in) batch.push_back(std::move(i));
        }
        if (batch.empty()) return;
        auto logits = model.step(batch);
        size_t off = 0;
        for (auto& [s, n] : owners) {
            s->consume(std::span<std::vector<float>>(logits.data() + off, n), model);
            off += n;
        }
    }
}

}  // namespace parlance
