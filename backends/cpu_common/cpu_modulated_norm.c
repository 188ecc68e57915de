/*
 * VH_BLOCK_MODULATED_NORM on the CPU, per frame (StreamPETR's MLN, the PETR heads' ego-motion
 * modulation of the memory's positions):
 *
 *   h = relu(reduce(c));  y = gamma(h) * layernorm(x) + beta(h)    (the norm without affine)
 */
#include "cpu_executor.h"

/* Scratch: h, gamma, beta and the normed x [rows, D] each, then ones and zeros [D] (the norm's
 * missing affine). */
uint64_t cpu_modulated_norm_scratch_floats(const vh_executor *e, const cpu_block *b)
{
    const vh_query_set_desc x = cpu_query_set(e, b->desc->inputs[0]);
    return (uint64_t)(4 * (int64_t)x.rows * x.width + 2 * (int64_t)x.width);
}

void cpu_modulated_norm(vh_executor *e, const cpu_block *b, const vh_batch *batch)
{
    const vh_block_desc *d = b->desc;
    const vh_query_set_desc xs = cpu_query_set(e, d->inputs[0]), cs = cpu_query_set(e, d->inputs[1]);
    const int64_t R = xs.rows, D = xs.width, n = R * D;
    float *h = b->scratch, *gamma = h + n, *beta = gamma + n, *normed = beta + n, *ones = normed + n, *zeros = ones + D;
    for (int64_t i = 0; i < D; i++) ones[i] = 1.0f, zeros[i] = 0.0f;
    for (uint32_t f = 0; f < batch->n_frames; f++) {
        const float *x = cpu_query_rows(e, d->inputs[0], f), *c = cpu_query_rows(e, d->inputs[1], f);
        float *y = cpu_query_rows(e, d->output, f);
        cpu_linear(e, b, VH_MLN_REDUCE_W, c, cs.width, R, b->vec[VH_MLN_REDUCE_B], h, D);
        vhk_relu(e->pool, h, n);
        cpu_linear(e, b, VH_MLN_GAMMA_W, h, D, R, b->vec[VH_MLN_GAMMA_B], gamma, D);
        cpu_linear(e, b, VH_MLN_BETA_W, h, D, R, b->vec[VH_MLN_BETA_B], beta, D);
        vhk_layernorm(e->pool, x, normed, R, D, ones, zeros, b->info.norm_eps);
        for (int64_t i = 0; i < n; i++) y[i] = gamma[i] * normed[i] + beta[i];
    }
}
