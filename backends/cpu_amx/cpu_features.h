/* What the CPU offers for bf16 matrix work, read with cpuid/xgetbv (and, for AMX, the kernel's
 * permission to use the tile state). */
#ifndef VH_CPU_AMX_FEATURES_H
#define VH_CPU_AMX_FEATURES_H

typedef struct cpu_bf16_features {
    int avx512;        /* AVX-512 F/BW/VL with the OS saving zmm state */
    int avx512_bf16;   /* AVX512_BF16 (vdpbf16ps) */
    int amx_bf16;      /* AMX-TILE + AMX-BF16 with the OS saving tile state */
} cpu_bf16_features;

cpu_bf16_features cpu_bf16_detect(void);

#endif
