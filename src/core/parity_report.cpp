// Parity report formatting (see parity_report.h).
#include "core/parity_report.h"

#include <cstdio>
#include <sstream>

namespace parlance {

std::string format_number(const char* format, double v) {
    char b[64];
    std::snprintf(b, sizeof b, format, v);
    return b;
}

bool ParityReport::all_pass() const {
    for (const auto& r : rows)
        if (!r.pass) return false;
    return !rows.empty();
}

std::string ParityReport::table() const {
    std::ostringstream os;
    os << "config " << config << "\n";
    char line[512];
    std::snprintf(line, sizeof line, "%-44s %-14s %-6s %s\n", "clip", "check", "result", "detail");
    os << line;
    int passed = 0;
    for (const auto& r : rows) {
        std::snprintf(line, sizeof line, "%-44s %-14s %-6s %s\n", r.clip.c_str(), r.check.c_str(),
                      r.pass ? "ok" : (r.near_tie ? "TIE" : "FAIL"), r.detail.c_str());
        os << line;
        passed += r.pass;
    }
    os << passed << " of " << rows.size() << " checks identical or within tolerance\n";
    return os.str();
}

}  // namespace parlance
