// The PARLANCE_* environment variables a run reads (the only place that reads them): the
// process-wide settings of core/runtime_settings.h. main() applies them before anything else; the
// tests' support code applies the same (ctest sets them per test, e.g. PARLANCE_ATTENTION_LAYOUT).
#pragma once

#include "core/runtime_settings.h"

namespace parlance::cli {

// The settings the environment asks for. Throws Error(InvalidArgument) naming the variable for a
// value it does not know.
RuntimeSettings runtime_settings_from_environment();
// set_runtime_settings(runtime_settings_from_environment()).
void apply_runtime_environment();
// The environment's settings with the GPU's numerics deterministic (--deterministic): applied by
// the flag's callback, while the command line is parsed, before the command loads anything.
void apply_deterministic_gpu();

}  // namespace parlance::cli
