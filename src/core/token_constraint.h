// A constraint on the tokens a sequence may generate (structured output: a grammar over the
// tokens' text). The engine knows nothing of grammars: it asks whether a chosen token is allowed,
// masks the row and chooses again when it is not, and reports every token it emits.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

namespace parlance {

class TokenConstraint {
public:
    virtual ~TokenConstraint() = default;
    // A fresh copy in the current state (each choice of a request constrains its own sequence).
    virtual std::unique_ptr<TokenConstraint> clone() const = 0;
    // Whether `token` may come next (an end-of-sequence id: whether the output may end here).
    virtual bool allows(int32_t token) const = 0;
    // Sets the logit of every token that may not come next to -infinity.
    virtual void mask(std::span<float> logits) const = 0;
    // Advances past a token allows() accepted (callers check first: the check is not repeated,
    // and a refused token throws).
    virtual void accept(int32_t token) = 0;
};

}  // namespace parlance
