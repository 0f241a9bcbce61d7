// What parlance adds around the bundle's grammar library (see grammar_glue.cpp).
#pragma once

#include <string>

// The messages llama-grammar logged on this thread since the last call (its parser reports a
// malformed grammar through its log, not through an exception), and clears them.
std::string llama_grammar_take_log();
