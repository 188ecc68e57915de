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
