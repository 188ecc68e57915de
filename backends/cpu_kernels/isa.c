/* Which hand-vectorised kernel variants this CPU can run. */
#include "kernels_internal.h"

int vhk_isa_supported(vhk_isa isa)
{
    switch (isa) {
    case VHK_ISA_GENERIC:
        return 1;
#if defined(__x86_64__) && defined(__GNUC__)
    case VHK_ISA_AVX2:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               __builtin_cpu_supports("f16c");
    case VHK_ISA_AVX512:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512f") != 0;
#endif
#if defined(__aarch64__)
    case VHK_ISA_NEON:
        return 1; /* Advanced SIMD is part of the aarch64 base architecture */
#endif
    default:
        return 0;
    }
}

vhk_isa vhk_isa_detect(void)
{
    if (vhk_isa_supported(VHK_ISA_NEON)) return VHK_ISA_NEON;
    if (vhk_isa_supported(VHK_ISA_AVX512)) return VHK_ISA_AVX512;
    if (vhk_isa_supported(VHK_ISA_AVX2)) return VHK_ISA_AVX2;
    return VHK_ISA_GENERIC;
}

const char *vhk_isa_name(vhk_isa isa)
{
    switch (isa) {
    case VHK_ISA_AVX512: return "avx512";
    case VHK_ISA_AVX2: return "avx2";
    case VHK_ISA_NEON: return "neon";
    default: return "generic";
    }
}
