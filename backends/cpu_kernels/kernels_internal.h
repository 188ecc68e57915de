/*
 * Internals of the cpu_generic kernels shared between their source files, the tests and the
 * benchmark: instruction-set variants, the direct-GEMM entry point and matmul tuning. The plugin
 * needs only cpu_kernels.h.
 */
#ifndef VH_CPU_KERNELS_INTERNAL_H
#define VH_CPU_KERNELS_INTERNAL_H

#include <stdint.h>

#include "cpu_kernels.h"

/* Instruction-set variants of the hand-vectorised kernels. All variants give identical bits. */
typedef enum vhk_isa {
    VHK_ISA_GENERIC = 0,  /* portable C (fmaf) */
    VHK_ISA_AVX2 = 1,     /* x86-64 with AVX2, FMA and F16C */
    VHK_ISA_AVX512 = 2,   /* x86-64 with AVX-512F */
    VHK_ISA_NEON = 3,     /* aarch64 Advanced SIMD (baseline there: compiled in, no run-time check) */
    VHK_ISA_COUNT         /* not a variant: one past the last, for loops over them */
} vhk_isa;

/* The best variant this CPU runs. */
vhk_isa vhk_isa_detect(void);

/* 1 when this CPU (and this build) can run the variant. */
int vhk_isa_supported(vhk_isa isa);

/* "generic", "avx2", "avx512", "neon". */
const char *vhk_isa_name(vhk_isa isa);

/* vhk_convert_to_f32 with a chosen variant (which must be supported). */
void vhk_convert_to_f32_isa(vhk_isa isa, const void *src, vh_dtype dtype, float *dst, int64_t n);

/* Bytes per element of a weight dtype (4 or 2). */
static inline int64_t vhk_dtype_size(vh_dtype dtype)
{
    return dtype == VH_DTYPE_F32 ? 4 : 2;
}

/* The direct GEMM (matmul_direct.c): y[r, o] = dot(x[r, :], W[o, :]) (+ bias[o]) for all rows and
 * the outputs o in [o_begin, o_end), W read in its own dtype. Each dot is the canonical order:
 * lane j (0..15) accumulates, by fused multiply-add in increasing k, the products with
 * k % 16 == j (the last partial block padded with zeros); then lanes are summed as (j, j+8),
 * then (j, j+4), (j, j+2), (0, 1); then the bias is added. */
typedef struct vhk_gemm_direct {
    const float *x;
    int64_t x_stride;
    int64_t rows;
    int64_t in;
    const void *w;            /* [out, in] of dtype, row-major, contiguous */
    vh_dtype dtype;
    const float *bias;        /* [out] or NULL */
    float *y;
    int64_t y_stride;
} vhk_gemm_direct;

void vhk_gemm_direct_run(vhk_isa isa, const vhk_gemm_direct *g, int64_t o_begin, int64_t o_end);

/* How a vhk_matmul splits the work (matmul.c explains the defaults). Tests and benchmarks read,
 * change and write it back. */
typedef struct vhk_matmul_tuning {
    vhk_isa isa;              /* direct-GEMM and conversion variant (must be supported) */
    int64_t sgemm_min_rows;   /* from this many rows on: sgemm (panels for F16/BF16) */
    int64_t panel_rows;       /* weight rows per converted panel (capped by the scratch) */
    int64_t direct_block_rows;    /* direct GEMM cache blocking: rows of x per block, */
    int64_t direct_block_outputs; /* and weight rows per block (0: from the cache budget) */
} vhk_matmul_tuning;

void vhk_matmul_get_tuning(const vhk_matmul *m, vhk_matmul_tuning *t);
void vhk_matmul_set_tuning(vhk_matmul *m, const vhk_matmul_tuning *t);

#endif /* VH_CPU_KERNELS_INTERNAL_H */
