/*
 * Linear layers: y = x W^T + b with W kept in the checkpoint's dtype.
 *
 * Two paths, chosen by the number of rows:
 *  - few rows (decode): the small GEMM of matmul_small.c streams W once, converting in registers,
 *    split over output columns on the pool;
 *  - many rows (prefill, ViT): OpenBLAS sgemm, which needs fp32 operands. F32 weights are passed
 *    as they are; F16/BF16 weights are converted PANEL_ROWS output rows at a time into a scratch
 *    panel (in parallel on the pool), and each panel is one sgemm into a column slice of y.
 *    Converting costs one pass over W per call, which the O(rows) reuse of each panel in sgemm
 *    amortises; it keeps fp32 weights out of memory except for one panel.
 */
#include <cblas.h>
#include <limits.h>
#include <stdlib.h>

#include "kernels_internal.h"

/* From this many rows on, sgemm beats the small GEMM (measured with bench_kernels on a 2-core
 * AMD EPYC (Zen 4, AVX-512) for Llama-2-7B shapes; see the benchmark's crossover table). */
#define DEFAULT_SGEMM_MIN_ROWS 16
/* Output rows per converted panel: 128 x 4096 fp32 is 2 MiB, small enough to stay in cache
 * between conversion and sgemm, wide enough for sgemm to run at full speed. */
#define DEFAULT_PANEL_ROWS 128
/* Narrower panels than this (huge `in` with a small scratch) go to the small GEMM instead. */
#define MIN_PANEL_ROWS 16
/* Parallel grain of the small GEMM, in groups of 4 output columns. */
#define SMALL_GEMM_MIN_MACS (64 * 1024)

struct vhk_matmul {
    vh_thread_pool *pool;
    vhk_isa isa;              /* small-GEMM and conversion variant */
    int64_t sgemm_min_rows;
    int64_t panel_rows;
    float *panel;             /* [panel_capacity] fp32 scratch for converted weight panels */
    int64_t panel_capacity;   /* in floats */
};

vhk_matmul *vhk_matmul_create(vh_thread_pool *pool, int64_t max_in)
{
    if (max_in < 1) max_in = 1;
    if (max_in > INT64_MAX / DEFAULT_PANEL_ROWS / (int64_t)sizeof(float)) return NULL;
    vhk_matmul *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->pool = pool;
    m->isa = vhk_isa_detect();
    m->sgemm_min_rows = DEFAULT_SGEMM_MIN_ROWS;
    m->panel_rows = DEFAULT_PANEL_ROWS;
    m->panel_capacity = DEFAULT_PANEL_ROWS * max_in;
    void *panel = NULL;
    if (posix_memalign(&panel, 64, (size_t)m->panel_capacity * sizeof(float)) != 0) {
        free(m);
        return NULL;
    }
    m->panel = panel;
    return m;
}

void vhk_matmul_destroy(vhk_matmul *m)
{
    if (!m) return;
    free(m->panel);
    free(m);
}

void vhk_matmul_configure(vhk_matmul *m, vhk_isa isa, int64_t sgemm_min_rows, int64_t panel_rows)
{
    m->isa = isa;
    if (sgemm_min_rows > 0) m->sgemm_min_rows = sgemm_min_rows;
    if (panel_rows > 0) m->panel_rows = panel_rows;
}

/* --- few rows ---------------------------------------------------------------------------------- */

typedef struct small_job {
    const vhk_small_gemm *g;
    vhk_isa isa;
    int64_t out;
} small_job;

/* Pool chunk: output column groups [begin, end) of 4 columns each. */
static void small_gemm_chunk(void *ctx, int64_t begin, int64_t end, int thread_index)
{
    (void)thread_index;
    const small_job *job = ctx;
    int64_t o_end = end * 4 < job->out ? end * 4 : job->out;
    vhk_small_gemm_run(job->isa, job->g, begin * 4, o_end);
}

static void linear_small(vhk_matmul *m, const vhk_small_gemm *g, int64_t out)
{
    small_job job = {g, m->isa, out};
    int64_t macs_per_group = 4 * g->rows * (g->in > 0 ? g->in : 1);
    int64_t grain = SMALL_GEMM_MIN_MACS / macs_per_group + 1;
    vh_parallel_for(m->pool, (out + 3) / 4, grain, small_gemm_chunk, &job);
}

/* --- many rows --------------------------------------------------------------------------------- */

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

static void sgemm_xwt(const float *x, int64_t x_stride, int64_t rows, int64_t in, const float *w,
                      int64_t n_out, float *y, int64_t y_stride)
{
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
        convert_job job = {(const char *)w->data + o0 * row_bytes, w->dtype, in, m->panel, m->isa};
        vh_parallel_for(m->pool, n, 4, convert_rows_chunk, &job);
        sgemm_xwt(x, x_stride, rows, in, m->panel, n, y + o0, y_stride);
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

    int blas_ok = rows >= m->sgemm_min_rows && in > 0 && fits_blasint(rows) && fits_blasint(in) &&
                  fits_blasint(out) && fits_blasint(x_stride) && fits_blasint(y_stride);
    int64_t panel_rows = m->panel_rows < m->panel_capacity / (in > 0 ? in : 1)
                             ? m->panel_rows
                             : m->panel_capacity / (in > 0 ? in : 1);
    if (blas_ok && w->dtype == VH_DTYPE_F32) {
        sgemm_xwt(x, x_stride, rows, in, w->data, out, y, y_stride);
    } else if (blas_ok && panel_rows >= MIN_PANEL_ROWS) {
        linear_panels(m, x, x_stride, rows, in, w, out, panel_rows, y, y_stride);
    } else {
        vhk_small_gemm g = {x, x_stride, rows, in, w->data, w->dtype, bias, y, y_stride};
        linear_small(m, &g, out);
        return; /* the small GEMM added the bias */
    }
    if (bias) {
        bias_job job = {y, y_stride, bias, out};
        vh_parallel_for(m->pool, rows, 1 + 16384 / out, add_bias_chunk, &job);
    }
}
