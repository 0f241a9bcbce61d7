// Which of the hand-written x86 kernels this CPU runs (the multi-column weight product, the full
// and the paged attention), read once from cpuid.
//
// PARLANCE_CPU_KERNELS=avx2 hides AVX-512 and =none hides both (never a higher path than the CPU
// has): the tests run the AVX2 kernels on AVX-512 machines, and a result can be compared across
// the paths a deployment's CPUs would take. Off x86 the answer is always none.
#pragma once

namespace parlance {

enum class CpuKernels {
    none,
    avx2,    // AVX2 + FMA + F16C
    avx512,  // and AVX-512 F, BW and VL
};

CpuKernels cpu_kernels();

// At least the AVX2 kernels.
inline bool cpu_has_avx2_kernels() {
    return cpu_kernels() != CpuKernels::none;
}

}  // namespace parlance
