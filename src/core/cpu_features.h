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

// The AVX-512 kernels and AVX-512 VNNI (an int8 dot product of four pairs into int32 in one
// instruction, VPDPBUSD): the q8_0 tiles use it where the CPU has it. Hidden with AVX-512.
bool cpu_has_avx512_vnni();

}  // namespace parlance
