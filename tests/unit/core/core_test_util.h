// Helpers for the core tests: error assertions and small deterministic tensors.
#pragma once

#include <functional>
#include <initializer_list>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/tensor_data.h"

namespace parlance::testing {

// Runs fn, expects an Error of `kind` whose message contains every string in `parts`.
inline void expect_error(const std::function<void()>& fn, ErrorKind kind, std::initializer_list<std::string> parts) {
    try {
        fn();
        ADD_FAILURE() << "no error thrown";
    } catch (const Error& e) {
        EXPECT_EQ(error_kind_name(e.kind()), std::string(error_kind_name(kind))) << e.what();
        for (const auto& p : parts)
            EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
                << "message '" << e.what() << "' does not name '" << p << "'";
    }
}

// n values in [-1, 1), deterministic in `seed`.
inline std::vector<float> ramp(size_t n, int seed = 1) {
    std::vector<float> v(n);
    uint32_t x = 2463534242u + static_cast<uint32_t>(seed);
    for (auto& f : v) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        f = static_cast<float>(x % 20000) / 10000.0f - 1.0f;
    }
    return v;
}

// Token ids start, start + 1, ..., n of them.
inline std::vector<int32_t> iota_tokens(int n, int start = 0) {
    std::vector<int32_t> t(n);
    std::iota(t.begin(), t.end(), start);
    return t;
}

}  // namespace parlance::testing
