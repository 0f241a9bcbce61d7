// cpuid behind core/cpu_features.h.
#include "core/cpu_features.h"
#include "core/runtime_settings.h"

#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#define PARLANCE_X86_CPUID 1
#endif

namespace parlance {
namespace {

CpuKernels detect_cpu_kernels() {
#ifdef PARLANCE_X86_CPUID
    __builtin_cpu_init();
    // F16C by cpuid (leaf 1, ecx bit 29): clang's __builtin_cpu_supports does not know it.
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
    const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl");
    const std::string& want = runtime_settings().cpu_kernels;
    if (want == "none") return CpuKernels::none;
    if (want == "avx2") return avx2 ? CpuKernels::avx2 : CpuKernels::none;
    if (avx512) return CpuKernels::avx512;
    return avx2 ? CpuKernels::avx2 : CpuKernels::none;
#else
    return CpuKernels::none;
#endif
}

}  // namespace

CpuKernels cpu_kernels() {
    static const CpuKernels value = detect_cpu_kernels();
    return value;
}

bool cpu_has_avx512_vnni() {
#ifdef PARLANCE_X86_CPUID
    static const bool value = [] {
        // cpuid leaf 7, subleaf 0: ecx bit 11 is AVX512_VNNI.
        unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
        return cpu_kernels() == CpuKernels::avx512 && __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) &&
               (ecx & (1u << 11)) != 0;
    }();
    return value;
#else
    return false;
#endif
}

}  // namespace parlance
