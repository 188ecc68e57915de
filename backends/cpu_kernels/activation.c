/* Activations: exact GELU (ViT MLPs, projector), SiLU-gated product (Llama MLP), ReLU (PETR heads). */
#include <math.h>

#include "cpu_kernels.h"

#define GRAIN_VALUES 4096

typedef struct act_job {
    float *x;
    const float *gate;
    const float *up;
    float *out;
} act_job;

/* Same operation order as PyTorch's CPU kernel: (x * 0.5) * (1 + erf(x * (1/sqrt 2))). */
static void gelu_chunk(void *ctx, int64_t begin, int64_t end, int thread_index)
{
    (void)thread_index;
    float *x = ((const act_job *)ctx)->x;
    const float inv_sqrt2 = (float)M_SQRT1_2;
    for (int64_t i = begin; i < end; i++) x[i] = (x[i] * 0.5f) * (1.0f + erff(x[i] * inv_sqrt2));
}

static void silu_mul_chunk(void *ctx, int64_t begin, int64_t end, int thread_index)
{
    (void)thread_index;
    const act_job *job = ctx;
    for (int64_t i = begin; i < end; i++) {
        float g = job->gate[i];
        job->out[i] = (g / (1.0f + expf(-g))) * job->up[i];
    }
}

void vhk_gelu_exact(vh_thread_pool *pool, float *x, int64_t n)
{
    act_job job = {x, NULL, NULL, NULL};
    vh_parallel_for(pool, n, GRAIN_VALUES, gelu_chunk, &job);
}

void vhk_silu_mul(vh_thread_pool *pool, const float *gate, const float *up, float *out, int64_t n)
{
    act_job job = {NULL, gate, up, out};
    vh_parallel_for(pool, n, GRAIN_VALUES, silu_mul_chunk, &job);
}

static void relu_chunk(void *ctx, int64_t begin, int64_t end, int thread_index)
{
    (void)thread_index;
    float *x = ((const act_job *)ctx)->x;
    for (int64_t i = begin; i < end; i++) x[i] = x[i] > 0.0f ? x[i] : (x[i] == x[i] ? 0.0f : x[i]);
}

void vhk_relu(vh_thread_pool *pool, float *x, int64_t n)
{
    act_job job = {x, NULL, NULL, NULL};
    vh_parallel_for(pool, n, GRAIN_VALUES, relu_chunk, &job);
}
