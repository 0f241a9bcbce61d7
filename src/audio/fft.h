// Mixed-radix complex FFT in double precision for arbitrary lengths (used by the log-mel STFT).
#pragma once

#include <complex>
#include <vector>

namespace parlance {

// Forward DFT X[k] = sum_n x[n] * exp(-2*pi*i*n*k/N), unnormalised, any N >= 1.
// Factors N into radices 4, 2, 3, 5 and any remaining primes (generic O(p^2) butterfly), so lengths
// with large prime factors are slow but correct. The plan is immutable: forward() is const and safe to
// call from several threads at once as long as each thread passes its own buffers.
class Fft {
public:
    explicit Fft(int n);

    int size() const { return n_; }

    // in, out: N complex values each; they must not alias. scratch: caller-owned, resized as needed.
    void forward(const std::complex<double>* in, std::complex<double>* out,
                 std::vector<std::complex<double>>& scratch) const;

private:
    void recurse(const std::complex<double>* in, int stride, std::complex<double>* out, int n,
                 size_t level, std::complex<double>* tmp) const;

    int n_;
    std::vector<int> factors_;                // radices, product == n_
    std::vector<std::complex<double>> twiddle_;  // exp(-2*pi*i*j/N), j in [0, N)
};

}  // namespace parlance
