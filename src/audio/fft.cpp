// Mixed-radix decimation-in-time FFT: recursion over the factor list, one butterfly pass per level.
#include "audio/fft.h"

#include <cmath>
#include <numbers>

#include "core/error.h"

namespace parlance {

Fft::Fft(int n) : n_(n) {
    if (n < 1) throw Error(ErrorKind::InvalidArgument, "FFT length must be >= 1, got " + std::to_string(n));
    int rest = n;
    for (int p : {4, 2, 3, 5}) {
        while (rest % p == 0) {
            factors_.push_back(p);
            rest /= p;
        }
    }
    for (int p = 7; rest > 1; p += 2) {
        while (rest % p == 0) {
            factors_.push_back(p);
            rest /= p;
        }
    }
    twiddle_.resize(static_cast<size_t>(n));
    for (int j = 0; j < n; ++j) {
        const double angle = -2.0 * std::numbers::pi * static_cast<double>(j) / static_cast<double>(n);
        twiddle_[static_cast<size_t>(j)] = {std::cos(angle), std::sin(angle)};
    }
}

void Fft::forward(const std::complex<double>* in, std::complex<double>* out,
                  std::vector<std::complex<double>>& scratch) const {
    if (n_ == 1) {
        out[0] = in[0];
        return;
    }
    int max_radix = 1;
    for (int p : factors_) max_radix = std::max(max_radix, p);
    if (scratch.size() < static_cast<size_t>(max_radix)) scratch.resize(static_cast<size_t>(max_radix));
    recurse(in, 1, out, n_, 0, scratch.data());
}

// Computes the n-point DFT of in[0], in[stride], ... into out[0..n): the p sub-transforms of length
// m = n/p go to out[q*m .. (q+1)*m), then each group {out[k + q*m]} gets a p-point butterfly with
// twiddles w_n^(q*k).
void Fft::recurse(const std::complex<double>* in, int stride, std::complex<double>* out, int n,
                  size_t level, std::complex<double>* tmp) const {
    const int p = factors_[level];
    const int m = n / p;
    if (m == 1) {
        for (int q = 0; q < p; ++q) out[q] = in[static_cast<ptrdiff_t>(q) * stride];
    } else {
        for (int q = 0; q < p; ++q) {
            recurse(in + static_cast<ptrdiff_t>(q) * stride, stride * p, out + static_cast<ptrdiff_t>(q) * m, m,
                    level + 1, tmp);
        }
    }
    const int tw_step = n_ / n;  // w_n^j == twiddle_[j * tw_step]
    const int root_step = n_ / p;  // w_p^j == twiddle_[j * root_step]
    const auto* tw = twiddle_.data();
    for (int k = 0; k < m; ++k) {
        // Twiddled inputs of this butterfly.
        for (int q = 0; q < p; ++q) {
            const auto v = out[k + q * m];
            tmp[q] = q == 0 ? v : v * tw[static_cast<size_t>(q * k * tw_step)];
        }
        if (p == 2) {
            out[k] = tmp[0] + tmp[1];
            out[k + m] = tmp[0] - tmp[1];
        } else if (p == 4) {
            const auto a0 = tmp[0] + tmp[2], a1 = tmp[0] - tmp[2];
            const auto b0 = tmp[1] + tmp[3], b1 = tmp[1] - tmp[3];
            const std::complex<double> b1_mi(b1.imag(), -b1.real());  // b1 * -i
            out[k] = a0 + b0;
            out[k + m] = a1 + b1_mi;
            out[k + 2 * m] = a0 - b0;
            out[k + 3 * m] = a1 - b1_mi;
        } else {
            for (int s = 0; s < p; ++s) {
                std::complex<double> acc = tmp[0];
                for (int q = 1; q < p; ++q) acc += tmp[q] * tw[static_cast<size_t>((q * s) % p) * root_step];
                out[k + s * m] = acc;
            }
        }
    }
}

}  // namespace parlance
