/*
 * cpu_amx's own bf16 GEMM (hand-written: oneDNN 2.6, what Debian 12 ships, reaches 0.2 TFLOP/s a
 * core on the Llama shapes; AMX peaks at 1.8):
 *
 *   y[rows, n] = epilogue( prologue(x)[rows, k] . W^T ),   W [n, k] packed once at load
 *
 * The packed weight (bf16_packed) is tiles in the order the kernels read them: panels of 32
 * output columns; in a panel, K steps of 32; in a step, two 16 x 16 tiles of bf16 pairs, the
 * layout AMX's TDPBF16PS and AVX-512's VDPBF16PS both take (B row j = the 16 columns' values at
 * k = 2j and 2j + 1). K and n are padded with zeros to multiples of 32.
 *
 * Two micro-kernels compute a 32 x 32 block of C over a run of K steps, fp32 accumulation:
 *  - AMX tiles (2 x 2 tiles: 4 tile loads per 4 TDPBF16PS), where the CPU has AMX and the rows
 *    reach bf16_gemm_amx_min_rows (fewer rows waste the 16-row tiles);
 *  - AVX-512 bf16 (VDPBF16PS), for the few-row products (decode steps: memory-bound, streaming
 *    the packed weight once) and for CPUs with AVX-512 bf16 but no AMX.
 * The driver splits the output columns (and, when they are few, the rows) across the pool's
 * threads, keeps 512 KB of B per core in L2 across the row blocks (K blocking), and applies the
 * epilogue once per element: store, add (a residual), bias, exact GELU, or SiLU(gate) * up of a
 * gated pair.
 */
#ifndef VH_CPU_AMX_BF16_GEMM_H
#define VH_CPU_AMX_BF16_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "thread_pool.h"
#include "vlahybrid/backend.h"

#define BF16_PANEL 32 /* output columns a panel */
#define BF16_KSTEP 32 /* K a step */

/* How a packed matrix's columns map onto its sources. */
typedef enum bf16_pack_layout {
    BF16_PACK_STACK = 0, /* sources' outputs one after another: [W0; W1; ...] (q|k|v) */
    BF16_PACK_GATED = 1, /* two sources interleaved 16 columns at a time, for BF16_EPI_SILU_MUL */
} bf16_pack_layout;

typedef struct bf16_packed {
    int64_t n, k;                      /* logical output columns and inputs */
    int64_t n_panels, k_steps;         /* padded: n_panels * 32 columns, k_steps * 32 inputs */
    bf16_pack_layout layout;
    uint16_t *data;                    /* n_panels * k_steps * 1024 bf16, 64-byte aligned */
} bf16_packed;

/* Pack n_src [n_i, k] matrices (bf16, f16 or f32 views; one k) into *out. GATED: exactly two
 * sources of one shape. Returns VH_OK, VH_ERR_OUT_OF_MEMORY or VH_ERR_INVALID_ARGUMENT (message
 * in err). Runs on the pool. */
vh_status bf16_pack(vh_thread_pool *pool, const vh_tensor_view *const *src, int n_src, bf16_pack_layout layout,
                    bf16_packed *out, char *err, size_t err_size);
void bf16_packed_free(bf16_packed *p);
/* Bytes the packed matrix holds. */
uint64_t bf16_packed_bytes(const bf16_packed *p);

typedef enum bf16_epilogue {
    BF16_EPI_STORE = 0,                /* y = C (+ bias) */
    BF16_EPI_ADD = 1,                  /* y += C (+ bias): a residual */
    BF16_EPI_SILU_MUL = 2,             /* GATED: y[:, j] = silu(gate_j) * up_j, n / 2 columns */
    BF16_EPI_GELU = 3,                 /* y = gelu(C (+ bias)), exact (erf) GELU: a ViT's fc1 */
} bf16_epilogue;

/* The activations in the kernels' form, bf16, K zero-padded to whole steps of 32 and rows to a
 * multiple of 32 (zeros). Element (r, k) is at
 *   data[(r / 32) block_stride + (r % 32) row_stride + (k / 32) step_stride + k % 32]
 * in one of two layouts (VH_BF16_A_LAYOUT=rows|tiles, for measuring; tiles by default):
 *   tiles: each row block's K step is one 2 KB tile pair (row_stride 32, step_stride 1024), so a
 *          tile load reads 1 KB in a row, one page;
 *   rows:  plain rows one cache line longer than their K steps (stride; row_stride = stride,
 *          step_stride 32): 16 tile rows at a multiple of 4 KB apart would fall in one L1 set. */
typedef struct bf16_activations {
    uint16_t *data;
    int64_t rows, k;
    int tiled;
    int64_t stride;                    /* rows: elements a row (k_steps * 32 + 32); tiles: k_steps * 32 */
    int64_t row_stride, step_stride, block_stride;
    size_t capacity;                   /* elements allocated */
} bf16_activations;

/* Fill `a` (growing it if needed) from x[rows, k] (x_stride floats apart). rms_weight NULL: no
 * normalisation. VH_ERR_OUT_OF_MEMORY when it cannot grow. */
vh_status bf16_activations_load(vh_thread_pool *pool, bf16_activations *a, const float *x, int64_t x_stride,
                                int64_t rows, int64_t k, const float *rms_weight, float rms_eps);
/* Room for `rows` rows of k (written now, so no call faults or allocates below it).
 * VH_ERR_OUT_OF_MEMORY when it cannot. */
vh_status bf16_activations_reserve(bf16_activations *a, int64_t rows, int64_t k);
void bf16_activations_free(bf16_activations *a);

/* Per-thread scratch of the GEMM (the C blocks of a thread's columns), made once a pool. */
typedef struct bf16_gemm_scratch bf16_gemm_scratch;
bf16_gemm_scratch *bf16_gemm_scratch_create(int n_threads);
void bf16_gemm_scratch_destroy(bf16_gemm_scratch *s);

typedef struct bf16_gemm_args {
    const bf16_activations *a;         /* a->k == w->k */
    const bf16_packed *w;
    const float *bias;                 /* [n] (STORE / ADD) or NULL */
    bf16_epilogue epilogue;
    float *y;                          /* [a->rows, y_cols] y_stride floats apart */
    int64_t y_stride;
} bf16_gemm_args;

/* Which micro-kernel the driver uses at a row count. */
typedef enum bf16_kernel {
    BF16_KERNEL_AUTO = 0,              /* AMX from bf16_gemm_amx_min_rows rows where it exists */
    BF16_KERNEL_AMX = 1,               /* (falls back to AVX-512 where AMX is absent) */
    BF16_KERNEL_AVX512 = 2,
} bf16_kernel;

/* The CPU's support, checked once (CPUID, XCR0; for AMX also the kernel's permission to use the
 * tile data state, asked for once per process). */
int bf16_gemm_has_avx512_bf16(void);
int bf16_gemm_has_amx(void);
/* Rows from which AUTO takes AMX (env VH_AMX_MIN_ROWS, default 8; read once). */
int64_t bf16_gemm_amx_min_rows(void);

/* Run y = epilogue(a . W^T) on the pool. The CPU must have AVX-512 bf16 (bf16_gemm_has_avx512_bf16). */
void bf16_gemm(vh_thread_pool *pool, bf16_gemm_scratch *scratch, const bf16_gemm_args *args, bf16_kernel kernel);

#endif
