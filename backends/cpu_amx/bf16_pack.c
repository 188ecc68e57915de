/*
 * The bf16 GEMM's operands in the order its kernels read them (bf16_gemm.h): weights packed once
 * at load into panels of tiles, activations rounded to bf16 (RMS-normalised on the way when asked)
 * into zero-padded rows at every call.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_error.h"
#include "backend_knobs.h"
#include "bf16_gemm.h"
#include "bf16_microkernels.h"

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

static uint16_t element_bf16(const vh_tensor_view *w, int64_t i)
{
    switch (w->dtype) {
    case VH_DTYPE_BF16: return ((const uint16_t *)w->data)[i];
    case VH_DTYPE_F16: return vh_f32_to_bf16(vh_f16_to_f32(((const uint16_t *)w->data)[i]));
    default: return vh_f32_to_bf16(((const float *)w->data)[i]);
    }
}

typedef struct pack_job {
    const vh_tensor_view *const *src;
    int n_src;
    bf16_packed *out;
} pack_job;

/* The source matrix and its row for packed column j (or NULL: a padding column). */
static const vh_tensor_view *column_source(const pack_job *j, int64_t col, int64_t *row)
{
    const bf16_packed *p = j->out;
    if (p->layout == BF16_PACK_GATED) { /* panel = 16 gate columns, then the same 16 of up */
        const int64_t panel = col / BF16_PANEL, within = col % BF16_PANEL;
        *row = panel * 16 + within % 16;
        return *row < j->src[0]->shape[0] ? j->src[within / 16] : NULL;
    }
    for (int s = 0; s < j->n_src; s++) {
        if (col < j->src[s]->shape[0]) {
            *row = col;
            return j->src[s];
        }
        col -= j->src[s]->shape[0];
    }
    return NULL;
}

/* Panels [begin, end): each column's K values as bf16 pairs, tile by tile, one K step at a time
 * (32 values of each of the panel's 32 rows of W into the step's 2 KB: reads and writes stay
 * near each other). */
static void pack_panels(void *ctx, int64_t begin, int64_t end, int thread_index)
{
    (void)thread_index;
    const pack_job *j = ctx;
    const bf16_packed *p = j->out;
    for (int64_t panel = begin; panel < end; panel++) {
        const vh_tensor_view *w[BF16_PANEL];
        int64_t row[BF16_PANEL];
        for (int64_t c = 0; c < BF16_PANEL; c++) w[c] = column_source(j, panel * BF16_PANEL + c, &row[c]);
        uint16_t *dst = p->data + (size_t)panel * p->k_steps * 1024;
        memset(dst, 0, sizeof(uint16_t) * (size_t)p->k_steps * 1024);
        for (int64_t s = 0; s < p->k_steps; s++) {
            uint16_t *step = dst + s * 1024;
            const int64_t k0 = s * BF16_KSTEP, n = p->k - k0 < BF16_KSTEP ? p->k - k0 : BF16_KSTEP;
            for (int64_t c = 0; c < BF16_PANEL; c++) {
                if (!w[c]) continue;
                /* column c of the panel: tile c / 16, column c % 16 of that tile */
                uint16_t *col = step + (c / 16) * 512 + (c % 16) * 2;
                const int64_t at = row[c] * p->k + k0;
                if (w[c]->dtype == VH_DTYPE_BF16) {
                    const uint16_t *src = (const uint16_t *)w[c]->data + at;
                    for (int64_t k = 0; k < n; k++) col[(k / 2) * 32 + (k & 1)] = src[k];
                } else {
                    for (int64_t k = 0; k < n; k++) col[(k / 2) * 32 + (k & 1)] = element_bf16(w[c], at + k);
                }
            }
        }
    }
}

vh_status bf16_pack(vh_thread_pool *pool, const vh_tensor_view *const *src, int n_src, bf16_pack_layout layout,
                    bf16_packed *out, char *err, size_t err_size)
{
    memset(out, 0, sizeof *out);
    if (!src || n_src < 1 || (layout == BF16_PACK_GATED && n_src != 2))
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "bf16_pack: %d source matrices for a %s pack",
                               n_src, layout == BF16_PACK_GATED ? "gated (two)" : "stacked");
    int64_t n = 0;
    for (int s = 0; s < n_src; s++) {
        const vh_tensor_view *w = src[s];
        if (!w || !w->data || w->ndim != 2 || w->shape[0] < 1 || w->shape[1] < 1 ||
            (w->dtype != VH_DTYPE_BF16 && w->dtype != VH_DTYPE_F16 && w->dtype != VH_DTYPE_F32))
            return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT,
                                   "bf16_pack: source %d is not a 2-D bf16/f16/f32 matrix", s);
        if (w->shape[1] != src[0]->shape[1] || (layout == BF16_PACK_GATED && w->shape[0] != src[0]->shape[0]))
            return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT,
                                   "bf16_pack: %s is [%lld, %lld], %s is [%lld, %lld]: %s", src[0]->name,
                                   (long long)src[0]->shape[0], (long long)src[0]->shape[1], w->name,
                                   (long long)w->shape[0], (long long)w->shape[1],
                                   layout == BF16_PACK_GATED ? "a gated pair needs one shape" : "inputs differ");
        n += w->shape[0];
    }
    out->n = n;
    out->k = src[0]->shape[1];
    out->layout = layout;
    out->n_panels = layout == BF16_PACK_GATED ? round_up(src[0]->shape[0], 16) / 16 : round_up(n, BF16_PANEL) / BF16_PANEL;
    out->k_steps = round_up(out->k, BF16_KSTEP) / BF16_KSTEP;
    const size_t bytes = (size_t)out->n_panels * (size_t)out->k_steps * 2048;
    out->data = aligned_alloc(64, bytes);
    if (!out->data)
        return vh_backend_fail(err, err_size, VH_ERR_OUT_OF_MEMORY, "bf16_pack: out of memory (%zu bytes for %s)", bytes,
                               src[0]->name ? src[0]->name : "a matrix");
    pack_job job = {src, n_src, out};
    vh_parallel_for(pool, out->n_panels, 1, pack_panels, &job);
    return VH_OK;
}

void bf16_packed_free(bf16_packed *p)
{
    if (!p) return;
    free(p->data);
    p->data = NULL;
}

uint64_t bf16_packed_bytes(const bf16_packed *p)
{
    return (uint64_t)p->n_panels * (uint64_t)p->k_steps * 2048u;
}

typedef struct load_job {
    const float *x;
    int64_t x_stride, k;
    const float *rms_weight;
    float rms_eps;
    bf16_activations *a;
} load_job;

/* Where row r's K step s starts. */
static uint16_t *step_at(const bf16_activations *a, int64_t r, int64_t s)
{
    return a->data + (r / 32) * a->block_stride + (r % 32) * a->row_stride + s * a->step_stride;
}

/* Row r of x (scaled by rs and w: RMSNorm) rounded into its place, K padded with zeros. */
static void store_row(const bf16_activations *a, int64_t r, const float *x, const float *w, float rs)
{
    const int64_t steps = (a->k + BF16_KSTEP - 1) / BF16_KSTEP;
    if (!a->tiled) {
        uint16_t *dst = step_at(a, r, 0);
        bf16_round_row(x, w, rs, dst, a->k);
        memset(dst + a->k, 0, sizeof(uint16_t) * (size_t)(a->stride - a->k));
        return;
    }
    for (int64_t s = 0; s < steps; s++) {
        const int64_t k0 = s * BF16_KSTEP, n = a->k - k0 < BF16_KSTEP ? a->k - k0 : BF16_KSTEP;
        uint16_t *dst = step_at(a, r, s);
        bf16_round_row(x + k0, w ? w + k0 : NULL, rs, dst, n);
        if (n < BF16_KSTEP) memset(dst + n, 0, sizeof(uint16_t) * (size_t)(BF16_KSTEP - n));
    }
}

/* Rows [begin, end): RMSNorm as vhk_rmsnorm computes it (mean of squares in double), then bf16. */
static void load_rows(void *ctx, int64_t begin, int64_t end, int thread_index)
{
    (void)thread_index;
    const load_job *j = ctx;
    for (int64_t r = begin; r < end; r++) {
        const float *x = j->x + r * j->x_stride;
        float rs = 1.0f;
        if (j->rms_weight) {
            double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            int64_t i = 0;
            for (; i + 4 <= j->k; i += 4) {
                s0 += (double)x[i] * x[i];
                s1 += (double)x[i + 1] * x[i + 1];
                s2 += (double)x[i + 2] * x[i + 2];
                s3 += (double)x[i + 3] * x[i + 3];
            }
            for (; i < j->k; i++) s0 += (double)x[i] * x[i];
            rs = (float)(1.0 / sqrt(((s0 + s1) + (s2 + s3)) / (double)j->k + (double)j->rms_eps));
        }
        store_row(j->a, r, x, j->rms_weight, rs);
    }
}

static int tiled_layout;
static pthread_once_t layout_once = PTHREAD_ONCE_INIT;

static void read_layout(void)
{
    tiled_layout = !vh_knob_is(VH_KNOB_BF16_A_LAYOUT, "rows");
}

/* Elements a row takes in the layout (steps of 32; plain rows one cache line more). */
static int64_t row_width(int tiled, int64_t k)
{
    return round_up(k, BF16_KSTEP) + (tiled ? 0 : 32);
}

/* The buffer grown to `need` elements (its pages written). */
static vh_status grow(bf16_activations *a, size_t need)
{
    if (need <= a->capacity) return VH_OK;
    uint16_t *grown = aligned_alloc(64, round_up((int64_t)need * 2, 64));
    if (!grown) return VH_ERR_OUT_OF_MEMORY;
    memset(grown, 0, need * 2);
    free(a->data);
    a->data = grown;
    a->capacity = need;
    return VH_OK;
}

vh_status bf16_activations_reserve(bf16_activations *a, int64_t rows, int64_t k)
{
    pthread_once(&layout_once, read_layout);
    return grow(a, (size_t)round_up(rows > 0 ? rows : 1, 32) * (size_t)row_width(tiled_layout, k));
}

vh_status bf16_activations_load(vh_thread_pool *pool, bf16_activations *a, const float *x, int64_t x_stride,
                                int64_t rows, int64_t k, const float *rms_weight, float rms_eps)
{
    pthread_once(&layout_once, read_layout);
    const int tiled = tiled_layout;
    const int64_t steps = round_up(k, BF16_KSTEP) / BF16_KSTEP, padded_rows = round_up(rows > 0 ? rows : 1, 32);
    const int64_t stride = row_width(tiled, k);
    if (grow(a, (size_t)padded_rows * (size_t)stride)) return VH_ERR_OUT_OF_MEMORY;
    a->rows = rows;
    a->k = k;
    a->tiled = tiled;
    a->stride = stride;
    a->row_stride = tiled ? BF16_KSTEP : stride;
    a->step_stride = tiled ? 1024 : BF16_KSTEP;
    a->block_stride = 32 * stride;
    load_job job = {x, x_stride, k, rms_weight, rms_eps, a};
    vh_parallel_for(pool, rows, 4, load_rows, &job);
    for (int64_t r = rows; r < padded_rows; r++) /* the last row block's padding rows: zeros */
        for (int64_t s = 0; s < (tiled ? steps : 1); s++)
            memset(step_at(a, r, s), 0, sizeof(uint16_t) * (size_t)(tiled ? BF16_KSTEP : stride));
    return VH_OK;
}

void bf16_activations_free(bf16_activations *a)
{
    if (!a) return;
    free(a->data);
    memset(a, 0, sizeof *a);
}
