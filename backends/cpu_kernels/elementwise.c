/* Residual adds, LayerScale and bias: memory-bound loops, split over the pool. */
#include "cpu_kernels.h"

#define GRAIN_VALUES (1 << 15)  /* values per chunk: below this, threads cost more than they save */

typedef struct add_job {
    float *y;
    const float *x;
    const float *vec;         /* per-column scale or bias */
    int64_t dim;
} add_job;

static void add_chunk(void *ctx, int64_t begin, int64_t end, int thread_index)
{
    (void)thread_index;
    const add_job *job = ctx;
    float *y = job->y;
    const float *x = job->x;
    for (int64_t i = begin; i < end; i++) y[i] += x[i];
}

static void add_scaled_rows(void *ctx, int64_t begin, int64_t end, int thread_index)
{
    (void)thread_index;
    const add_job *job = ctx;
    for (int64_t r = begin; r < end; r++) {
        float *y = job->y + r * job->dim;
        const float *x = job->x + r * job->dim;
        const float *s = job->vec;
        for (int64_t c = 0; c < job->dim; c++) y[c] += s[c] * x[c];
    }
}

static void add_bias_rows(void *ctx, int64_t begin, int64_t end, int thread_index)
{
    (void)thread_index;
    const add_job *job = ctx;
    for (int64_t r = begin; r < end; r++) {
        float *y = job->y + r * job->dim;
        const float *b = job->vec;
        for (int64_t c = 0; c < job->dim; c++) y[c] += b[c];
    }
}

void vhk_add(vh_thread_pool *pool, float *y, const float *x, int64_t n)
{
    add_job job = {y, x, NULL, 0};
    vh_parallel_for(pool, n, GRAIN_VALUES, add_chunk, &job);
}

void vhk_add_scaled(vh_thread_pool *pool, float *y, const float *x, const float *scale,
                    int64_t rows, int64_t dim)
{
    if (rows <= 0 || dim <= 0) return;
    if (!scale) {
        vhk_add(pool, y, x, rows * dim);
        return;
    }
    add_job job = {y, x, scale, dim};
    vh_parallel_for(pool, rows, 1 + GRAIN_VALUES / dim, add_scaled_rows, &job);
}

void vhk_add_bias(vh_thread_pool *pool, float *y, const float *bias, int64_t rows, int64_t dim)
{
    if (rows <= 0 || dim <= 0) return;
    add_job job = {y, NULL, bias, dim};
    vh_parallel_for(pool, rows, 1 + GRAIN_VALUES / dim, add_bias_rows, &job);
}
