// Structured output's token constraint: a GBNF grammar (parsed and matched code point by code
// point by the bundle's llama-grammar) over the text of each token of a tokenizer. A token is
// allowed when some parse of the output so far can go on with all of its code points (a token
// ending inside a UTF-8 character: with what that character can still become); an end-of-sequence
// token when the grammar is complete. Special tokens other than the end ones are never allowed.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/token_constraint.h"
#include "text/schema_check.h"
#include "text/tokenizer.h"

namespace parlance {

// Every token of a model's vocabulary decoded to code points once (shared by all requests).
class GrammarVocabulary {
public:
    // `rows` is the model's logits width (Qwen3's 151,936 for 151,669 tokens: the rest are never
    // allowed); `end_ids` the end-of-sequence ids.
    GrammarVocabulary(const Tokenizer& tokenizer, size_t rows, std::vector<int32_t> end_ids);
    ~GrammarVocabulary();

    struct Impl;
    const Impl& impl() const { return *impl_; }

private:
    std::unique_ptr<Impl> impl_;
};

// Parses `gbnf` (root rule "root"); throws Error(InvalidArgument) with the parser's message, or
// when the grammar starts with more than `max_stacks` parse stacks (alternatives open at once:
// each is matched against the whole vocabulary on every masked step). Past the start, a token
// that leaves more stacks keeps the first `max_stacks` of them: the output stays in the
// grammar's language (those are valid parses), the step's cost stays bounded.
std::unique_ptr<TokenConstraint> make_grammar_constraint(const std::string& gbnf,
                                                         std::shared_ptr<const GrammarVocabulary> vocabulary,
                                                         size_t max_stacks = SchemaLimits{}.max_grammar_stacks);
// Parses `gbnf` as make_grammar_constraint does and returns its parse stacks at the start,
// without a vocabulary (what the schema fuzz target and the limits' tests need).
size_t grammar_start_stacks(const std::string& gbnf);

}  // namespace parlance
