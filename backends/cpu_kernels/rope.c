/* Rotary position embedding, Hugging Face Llama "rotate half" layout, fp32 like transformers. */
#include <math.h>

#include "cpu_kernels.h"

typedef struct rope_job {
    float *x;
    int64_t row_stride;
    int64_t n_heads;
    int64_t head_dim;
    const int32_t *positions;
    float theta;
} rope_job;

/* Each row: for every frequency i, one cos/sin pair (float32 angle, as transformers computes
 * inv_freq = 1 / theta^(2i/d) and pos * inv_freq in float32), applied to all heads. */
static void rope_rows(void *ctx, int64_t begin, int64_t end, int thread_index)
{
    (void)thread_index;
    const rope_job *job = ctx;
    int64_t half = job->head_dim / 2;
    for (int64_t r = begin; r < end; r++) {
        float *row = job->x + r * job->row_stride;
        float pos = (float)job->positions[r];
        for (int64_t i = 0; i < half; i++) {
            float exponent = (float)(2 * i) / (float)job->head_dim;
            float inv_freq = 1.0f / powf(job->theta, exponent);
            float angle = pos * inv_freq;
            float c = cosf(angle), s = sinf(angle);
            for (int64_t h = 0; h < job->n_heads; h++) {
                float *head = row + h * job->head_dim;
                float a = head[i], b = head[i + half];
                head[i] = a * c - b * s;
                head[i + half] = b * c + a * s;
            }
        }
    }
}

void vhk_rope(vh_thread_pool *pool, float *x, int64_t row_stride, int64_t rows, int64_t n_heads,
              int64_t head_dim, const int32_t *positions, float theta)
{
    if (head_dim < 2 || n_heads <= 0) return;
    rope_job job = {x, row_stride, n_heads, head_dim, positions, theta};
    int64_t grain = 1 + 8192 / (n_heads * head_dim);
    vh_parallel_for(pool, rows, grain, rope_rows, &job);
}

/* ------------------------------------------------------------------------------------------------
 * 2-D interleaved RoPE (EVA-02's VisionRotaryEmbeddingFast with rotate_half on channel pairs). */

void vhk_rope_2d_table(int64_t side, int64_t rope_grid, int64_t head_dim, float theta, float *cos_table,
                       float *sin_table)
{
    /* As the reference builds it in float32: t = arange(side) / side * rope_grid; inv_freq[j] =
     * 1 / theta^(2j / (head_dim / 2)) for j < head_dim / 4; angle = t * inv_freq. */
    const int64_t quarter = head_dim / 4, half = head_dim / 2;
    for (int64_t i = 0; i < side; i++) {
        const float t = (float)i / (float)side * (float)rope_grid;
        for (int64_t j = 0; j < quarter; j++) {
            const float inv_freq = 1.0f / powf(theta, (float)(2 * j) / (float)half);
            const float angle = t * inv_freq;
            cos_table[i * quarter + j] = cosf(angle);
            sin_table[i * quarter + j] = sinf(angle);
        }
    }
}

typedef struct rope_2d_job {
    float *x;
    int64_t row_stride, n_heads, head_dim;
    const int32_t *row_of, *col_of;
    const float *cos_table, *sin_table;
} rope_2d_job;

/* Pair (2j, 2j+1) of the head's first half by the row's angle j, of its second half by the
 * column's: x' = x cos - y sin, y' = y cos + x sin. */
static void rope_2d_rows(void *ctx, int64_t begin, int64_t end, int thread_index)
{
    (void)thread_index;
    const rope_2d_job *j = ctx;
    const int64_t quarter = j->head_dim / 4, half = j->head_dim / 2;
    for (int64_t r = begin; r < end; r++) {
        float *row = j->x + r * j->row_stride;
        const float *rc = j->cos_table + (int64_t)j->row_of[r] * quarter, *rs = j->sin_table + (int64_t)j->row_of[r] * quarter;
        const float *cc = j->cos_table + (int64_t)j->col_of[r] * quarter, *cs = j->sin_table + (int64_t)j->col_of[r] * quarter;
        for (int64_t h = 0; h < j->n_heads; h++) {
            float *head = row + h * j->head_dim;
            for (int64_t p = 0; p < quarter; p++) {
                float a = head[2 * p], b = head[2 * p + 1];
                head[2 * p] = a * rc[p] - b * rs[p];
                head[2 * p + 1] = b * rc[p] + a * rs[p];
                a = head[half + 2 * p], b = head[half + 2 * p + 1];
                head[half + 2 * p] = a * cc[p] - b * cs[p];
                head[half + 2 * p + 1] = b * cc[p] + a * cs[p];
            }
        }
    }
}

void vhk_rope_2d(vh_thread_pool *pool, float *x, int64_t row_stride, int64_t rows, int64_t n_heads,
                 int64_t head_dim, const int32_t *row_of, const int32_t *col_of, const float *cos_table,
                 const float *sin_table)
{
    if (head_dim < 4 || n_heads <= 0) return;
    rope_2d_job job = {x, row_stride, n_heads, head_dim, row_of, col_of, cos_table, sin_table};
    vh_parallel_for(pool, rows, 1 + 8192 / (n_heads * head_dim), rope_2d_rows, &job);
}
