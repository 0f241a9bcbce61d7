// Small formatting helpers the subcommands share.
#pragma once

#include <cstdint>
#include <string>

namespace parlance::cli {

// "1.5 MiB", "312 B": binary units, one decimal above bytes.
std::string human_bytes(uint64_t n);
// "0.03 s", "12.40 s": seconds with two decimals, for log lines.
std::string seconds(double s);

}  // namespace parlance::cli
