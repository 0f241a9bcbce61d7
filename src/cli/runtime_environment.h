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

}  // namespace parlance::cli
