#include "cpu_features.h"

#include <cpuid.h>
#include <stdint.h>

static uint64_t read_xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

cpu_bf16_features cpu_bf16_detect(void)
{
    cpu_bf16_features f = {0};
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return f; /* no OSXSAVE: no xgetbv */
    const uint64_t xcr0 = read_xcr0();
    const int os_zmm = (xcr0 & 0xe6) == 0xe6;                      /* SSE, AVX, opmask, zmm halves */
    const int os_tiles = (xcr0 & (3ull << 17)) == (3ull << 17);    /* XTILECFG, XTILEDATA */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
    const int avx512 = (b & (1u << 16)) && (b & (1u << 30)) && (b & (1u << 31)); /* F, BW, VL */
    const int amx = (d & (1u << 22)) && (d & (1u << 24));                      /* AMX-BF16, AMX-TILE */
    f.avx512 = avx512 && os_zmm;
    f.amx_bf16 = amx && os_tiles && f.avx512;
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avx512_bf16 = f.avx512 && (a & (1u << 5));
    return f;
}
