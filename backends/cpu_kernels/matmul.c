/*
 * Linear layers: y = x W^T + b with W kept in the checkpoint's dtype.
 *
 * Two paths, chosen by the number of rows:
 *  - direct (matmul_direct.c): reads W in its dtype and converts in registers; split over output
 *    columns on the pool, cache-blocked over (weight rows x x rows). Every output is one
 *    fixed-order sum, so results do not depend on the pool size.
 *  - sgemm: F32 weights go straight to OpenBLAS; F16/BF16 weights are converted `panel_rows`
 *    output rows at a time into a scratch panel (in parallel on the pool), and each panel is one
 *    cblas_sgemm into a column slice of y (the pool's workers parked meanwhile: OpenBLAS has
 *    threads of its own). fp32 weights never exist beyond one panel. If the scratch cannot be
 *    allocated, the direct GEMM serves the call: vhk_linear cannot fail.
 * Which is faster depends on the CPU; the defaults below come from bench_kernels.
 */
#include <cblas.h>
#include <limits.h>
#include <stdlib.h>
#include <strings.h>

#include "kernels_internal.h"

/* Rows from which sgemm takes over, per direct-GEMM variant. Measured with bench_kernels
 * (crossover section: Llama-2-7B shapes, BF16 weights, 512-row panels, 2 threads):
 *  - AVX-512 direct GEMM (4x4 register tiles) vs converted panels + OpenBLAS sgemm:
 *    on AMD Zen 4, where OpenBLAS 0.3.21 runs its Haswell (AVX2) kernels, direct won at every
 *    row count (1..286: 1.4-1.6x at 286 rows, 5-10x at <= 16 rows); on an Intel Xeon where
 *    OpenBLAS 0.3.26 runs its Cooperlake (AVX-512) kernels, direct won up to 64 rows, tied at
 *    128 and lost by 1.1-1.4x at 286. So: sgemm from 128 rows when OpenBLAS has AVX-512
 *    kernels, else never.
 *  - AVX2 direct GEMM (2x2 tiles): panels win from 20..32 rows on both machines.
 *  - NEON direct GEMM (2x2 tiles of 4 x 128-bit quarters, half AVX2's width): not measured on
 *    aarch64 hardware yet (bench_kernels --section crossover on a Jetson tells); sgemm from 16
 *    rows, where AVX2's 2x2 tiles of twice the width already lose.
 *  - portable C: not measured on a machine where it is the best variant (non-x86); its dot
 *    products are only as fast as the compiler's auto-vectorisation, so sgemm takes over early. */
#define SGEMM_MIN_ROWS_AVX512_WITH_AVX512_BLAS 128
#define SGEMM_MIN_ROWS_AVX2 24
#define SGEMM_MIN_ROWS_NEON 16
#define SGEMM_MIN_ROWS_GENERIC 4
/* Weight rows per converted panel. Each sgemm call packs x again, so wide panels pay: at 286
 * rows, 512-row panels beat 128-row ones by 1.2-1.6x (bench_kernels --section panel, both
 * machines); 1024 was no better. The scratch (512 x max_in floats, 22 MiB for Llama-2-7B's 11008)
 * is allocated by the first call that takes this path. */
#define DEFAULT_PANEL_ROWS 512
/* Narrower panels than this (an `in` much larger than max_in, or no scratch) go to the direct
 * GEMM instead. */
#define MIN_PANEL_ROWS 16
/* Direct-GEMM cache blocks: a block of x rows small enough for L2 (256 KiB: 16 rows of 4096;
 * at least 8 rows) is swept by a block of weight rows that stays in L3 (2 MiB: 256 BF16 rows of
 * 4096), so W is read from memory once per call and x from L2 once per 4-row weight tile.
 * bench_kernels --section blocks (noisy shared machines): 8-16 x rows beat 64+ rows by 10-30%
 * at 286 and 1024 rows on Zen 4; weight blocks of 64..512 rows were within noise. */
#define DIRECT_WEIGHT_BLOCK_BYTES (2 * 1024 * 1024)
#define DIRECT_X_BLOCK_BYTES (256 * 1024)
/* Parallel grain of the direct GEMM: at least this many multiply-adds per chunk. */
#define DIRECT_MIN_MACS (64 * 1024)

struct vhk_matmul {
    vh_thread_pool *pool;
    vhk_matmul_tuning tuning;
    int64_t max_in;
    float *panel;             /* [panel_capacity] fp32 scratch for converted weight panels, or NULL
                                 until the sgemm path first needs it */
    int64_t panel_capacity;   /* in floats */
};

/* Whether OpenBLAS picked AVX-512 sgemm kernels for this CPU (its core names for those). */
static int openblas_runs_avx512(void)
{
    static const char *const avx512_cores[] = {"skylakex", "cooperlake", "sapphirerapids"};
    const char *core = openblas_get_corename();
    for (size_t i = 0; core && i < sizeof avx512_cores / sizeof avx512_cores[0]; i++)
        if (strcasecmp(core, avx512_cores[i]) == 0) return 1;
    return 0;
}

static int64_t default_sgemm_min_rows(vhk_isa isa)
{
    switch (isa) {
    case VHK_ISA_AVX512:
        return openblas_runs_avx512() ? SGEMM_MIN_ROWS_AVX512_WITH_AVX512_BLAS : INT64_MAX;
    case VHK_ISA_AVX2: return SGEMM_MIN_ROWS_AVX2;
    case VHK_ISA_NEON: return SGEMM_MIN_ROWS_NEON;
    default: return SGEMM_MIN_ROWS_GENERIC;
    }
}

vhk_matmul *vhk_matmul_create(vh_thread_pool *pool, int64_t max_in)
{
    vhk_matmul *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->pool = pool;
    m->max_in = max_in < 1 ? 1 : max_in;
    m->tuning.isa = vhk_isa_detect();
    m->tuning.sgemm_min_rows = default_sgemm_min_rows(m->tuning.isa);
    m->tuning.panel_rows = DEFAULT_PANEL_ROWS;
    return m;
}

/* Weight rows per panel for this `in` (0: no usable scratch). Allocates the scratch, panel_rows x
 * max_in floats, on first use; a failed or overflowing allocation leaves 0 and the caller uses
 * the direct GEMM instead. */
static int64_t panel_rows_for(vhk_matmul *m, int64_t in)
{
    if (!m->panel) {
        int64_t rows = m->tuning.panel_rows;
        if (m->max_in > INT64_MAX / rows / (int64_t)sizeof(float)) return 0;
        void *panel = NULL;
        if (posix_memalign(&panel, 64, (size_t)(rows * m->max_in) * sizeof(float)) != 0) return 0;
        m->panel = panel;
        m->panel_capacity = rows * m->max_in;
    }
    int64_t rows = m->panel_capacity / in;
    return rows < m->tuning.panel_rows ? rows : m->tuning.panel_rows;
}

void vhk_matmul_destroy(vhk_matmul *m)
{
    if (!m) return;
    free(m->panel);
    free(m);
}

void vhk_matmul_get_tuning(const vhk_matmul *m, vhk_matmul_tuning *t)
{
    *t = m->tuning;
}

void vhk_matmul_set_tuning(vhk_matmul *m, const vhk_matmul_tuning *t)
{
    int64_t old_panel_rows = m->tuning.panel_rows;
    m->tuning = *t;
    if (m->tuning.sgemm_min_rows < 1) m->tuning.sgemm_min_rows = 1;
    if (m->tuning.panel_rows < 1) m->tuning.panel_rows = 1;
    if (m->tuning.panel_rows > old_panel_rows) { /* reallocate for the wider panels on next use */
        free(m->panel);
        m->panel = NULL;
        m->panel_capacity = 0;
    }
}

static int64_t clamp_i64(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* --- direct GEMM ------------------------------------------------------------------------------- */

typedef struct direct_job {
    const vhk_gemm_direct *g;
    vhk_isa isa;
    int64_t out;
    int64_t block_rows;       /* x rows per cache block */
    int64_t block_outputs;    /* weight rows per cache block (a multiple of 4) */
} direct_job;

/* Pool chunk: output columns [4 begin, 4 end). For each block of weight rows, every block of x
 * rows; inside, matmul_direct.c's register tiles. */
static void direct_chunk(void *ctx, int64_t begin, int64_t end, int thread_index)
{
    (void)thread_index;
    const direct_job *job = ctx;
    const vhk_gemm_direct *g = job->g;
    int64_t o_end = end * 4 < job->out ? end * 4 : job->out;
    for (int64_t o0 = begin * 4; o0 < o_end; o0 += job->block_outputs) {
        int64_t o1 = o_end - o0 < job->block_outputs ? o_end : o0 + job->block_outputs;
        for (int64_t r0 = 0; r0 < g->rows; r0 += job->block_rows) {
            vhk_gemm_direct block = *g;
            block.x = g->x + r0 * g->x_stride;
            block.y = g->y + r0 * g->y_stride;
            block.rows = g->rows - r0 < job->block_rows ? g->rows - r0 : job->block_rows;
            vhk_gemm_direct_run(job->isa, &block, o0, o1);
        }
    }
}

static void linear_direct(vhk_matmul *m, const vhk_gemm_direct *g, int64_t out)
{
    const vhk_matmul_tuning *t = &m->tuning;
    int64_t in = g->in > 0 ? g->in : 1;
    direct_job job = {g, t->isa, out, t->direct_block_rows, t->direct_block_outputs};
    if (job.block_rows <= 0)
        job.block_rows = clamp_i64(DIRECT_X_BLOCK_BYTES / (in * 4), 8, 1024) / 4 * 4;
    if (job.block_outputs <= 0)
        job.block_outputs = DIRECT_WEIGHT_BLOCK_BYTES / (in * vhk_dtype_size(g->dtype));
    job.block_outputs = clamp_i64(job.block_outputs, 4, 1 << 20) / 4 * 4;
    int64_t macs_per_group = 4 * g->rows * in;
    int64_t grain = DIRECT_MIN_MACS / macs_per_group + 1;
    vh_parallel_for(m->pool, (out + 3) / 4, grain, direct_chunk, &job);
}

/* --- sgemm ------------------------------------------------------------------------------------- */

typedef struct convert_job {
    const char *w;            /* first weight row of the panel */
    vh_dtype dtype;
    int64_t in;
    float *panel;
    vhk_isa isa;
} convert_job;

static void convert_rows_chunk(void *ctx, int64_t begin, int64_t end, int thread_index)
{
    (void)thread_index;
    const convert_job *job = ctx;
    int64_t row_bytes = job->in * vhk_dtype_size(job->dtype);
    for (int64_t r = begin; r < end; r++)
        vhk_convert_to_f32_isa(job->isa, job->w + r * row_bytes, job->dtype, job->panel + r * job->in,
                               job->in);
}

typedef struct bias_job {
    float *y;
    int64_t y_stride;
    const float *bias;
    int64_t out;
} bias_job;

static void add_bias_chunk(void *ctx, int64_t begin, int64_t end, int thread_index)
{
    (void)thread_index;
    const bias_job *job = ctx;
    for (int64_t r = begin; r < end; r++) {
        float *row = job->y + r * job->y_stride;
        for (int64_t c = 0; c < job->out; c++) row[c] += job->bias[c];
    }
}

/* OpenBLAS runs sgemm on threads of its own: the pool's workers are parked first, so that they
 * block instead of spinning on the cores OpenBLAS's threads need. */
static void sgemm_xwt(vh_thread_pool *pool, const float *x, int64_t x_stride, int64_t rows, int64_t in,
                      const float *w, int64_t n_out, float *y, int64_t y_stride)
{
    vh_thread_pool_park(pool);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)rows, (blasint)n_out, (blasint)in,
                1.0f, x, (blasint)x_stride, w, (blasint)in, 0.0f, y, (blasint)y_stride);
}

/* Panels of `panel_rows` weight rows: convert on the pool, then one sgemm each. */
static void linear_panels(vhk_matmul *m, const float *x, int64_t x_stride, int64_t rows, int64_t in,
                          const vh_tensor_view *w, int64_t out, int64_t panel_rows, float *y,
                          int64_t y_stride)
{
    int64_t row_bytes = in * vhk_dtype_size(w->dtype);
    for (int64_t o0 = 0; o0 < out; o0 += panel_rows) {
        int64_t n = out - o0 < panel_rows ? out - o0 : panel_rows;
        convert_job job = {(const char *)w->data + o0 * row_bytes, w->dtype, in, m->panel,
                           m->tuning.isa};
        vh_parallel_for(m->pool, n, 4, convert_rows_chunk, &job);
        sgemm_xwt(m->pool, x, x_stride, rows, in, m->panel, n, y + o0, y_stride);
    }
}

static int fits_blasint(int64_t v)
{
    return v >= 0 && v <= (int64_t)INT_MAX;
}

void vhk_linear(vhk_matmul *m, const float *x, int64_t x_stride, int64_t rows, int64_t in,
                const vh_tensor_view *w, const float *bias, float *y, int64_t y_stride)
{
    int64_t out = w->shape[0];
    if (rows <= 0 || out <= 0) return;

    int use_sgemm = rows >= m->tuning.sgemm_min_rows && in > 0 && fits_blasint(rows) &&
                    fits_blasint(in) && fits_blasint(out) && fits_blasint(x_stride) &&
                    fits_blasint(y_stride);
    int64_t panel_rows = 0;
    if (use_sgemm && w->dtype != VH_DTYPE_F32) panel_rows = panel_rows_for(m, in);

    if (use_sgemm && w->dtype == VH_DTYPE_F32) {
        sgemm_xwt(m->pool, x, x_stride, rows, in, w->data, out, y, y_stride);
    } else if (use_sgemm && panel_rows >= MIN_PANEL_ROWS) {
        linear_panels(m, x, x_stride, rows, in, w, out, panel_rows, y, y_stride);
    } else {
        vhk_gemm_direct g = {x, x_stride, rows, in, w->data, w->dtype, bias, y, y_stride};
        linear_direct(m, &g, out);
        return; /* the direct GEMM added the bias */
    }
    if (bias) {
        bias_job job = {y, y_stride, bias, out};
        vh_parallel_for(m->pool, rows, 1 + 16384 / out, add_bias_chunk, &job);
    }
}
