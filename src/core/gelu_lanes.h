// The loop both vector kernels of core/gelu share: whole vectors, then the tail through the same
// lanes, padded with zeros, so a value's result never depends on where it sits. Included by each
// kernel file, which is compiled for its own instruction set; the anonymous namespace keeps every
// instantiation inside its file (no other file's instructions can be linked in its place).
#pragma once

#include <algorithm>
#include <cstdint>

namespace parlance {
namespace {

// Lanes: W (lanes), V (vector type), load(const float*), store(float*, V), gelu(V).
template <class Lanes>
void gelu_lanes(const float* in, float* out, int64_t n) {
    constexpr int64_t W = Lanes::W;
    int64_t i = 0;
    for (; i + W <= n; i += W) Lanes::store(out + i, Lanes::gelu(Lanes::load(in + i)));
    if (i < n) {
        alignas(64) float buf[W] = {};
        std::copy(in + i, in + n, buf);
        Lanes::store(buf, Lanes::gelu(Lanes::load(buf)));
        std::copy(buf, buf + (n - i), out + i);
    }
}

}  // namespace
}  // namespace parlance
