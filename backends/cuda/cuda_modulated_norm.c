/*
 * VH_BLOCK_MODULATED_NORM on the GPU, per frame (StreamPETR's MLN, the PETR heads' ego-motion
 * modulation of the memory's positions; backends/cpu_common/cpu_modulated_norm.c is the CPU's):
 *
 *   h = relu(reduce(c));  y = gamma(h) * layernorm(x) + beta(h)    (the norm without affine)
 *
 * The three linear layers on cuBLASLt (bf16 inputs), the norm and the modulation in one kernel.
 */
#include "cuda_executor.h"
#include "cuda_memory_plan.h"

typedef struct mln_scratch {
    vhc_bf16 *c;                       /* [R, C] the condition */
    float *h;                          /* [R, D] reduce's output; then gamma's */
    vhc_bf16 *h_bf16;                  /* [R, D] relu(h) */
    float *beta;                       /* [R, D] */
} mln_scratch;

static size_t carve(const vh_executor *e, const cuda_block *b, char *base, mln_scratch *s)
{
    const vh_query_set_desc x = cuda_query_set(e, b->desc->inputs[0]), c = cuda_query_set(e, b->desc->inputs[1]);
    const size_t R = x.rows, D = x.width;
    cuda_arena a = {.base = base};
    s->c = cuda_arena_take(&a, R * c.width * 2);
    s->h = cuda_arena_take(&a, R * D * 4);
    s->h_bf16 = cuda_arena_take(&a, R * D * 2);
    s->beta = cuda_arena_take(&a, R * D * 4);
    return a.used;
}

size_t cuda_modulated_norm_scratch_bytes(const vh_executor *e, const cuda_block *b)
{
    mln_scratch s;
    return carve(e, b, NULL, &s);
}

vh_status cuda_modulated_norm(vh_executor *e, const cuda_block *b, const vh_batch *batch, char *err, size_t err_size)
{
    const vh_block_desc *d = b->desc;
    const vh_query_set_desc xs = cuda_query_set(e, d->inputs[0]), cs = cuda_query_set(e, d->inputs[1]);
    const int R = (int)xs.rows, D = (int)xs.width, C = (int)cs.width;
    mln_scratch s;
    carve(e, b, e->queries.scratch, &s);
    vh_status st;
    for (uint32_t f = 0; f < batch->n_frames; f++) {
        VHC_MARK(e, "query.mln", R);
        vhc_f32_to_bf16(e->stream, cuda_query_rows(e, d->inputs[1], f), s.c, (int64_t)R * C);
        if ((st = vhc_linear(e->gemm, s.c, C, R, C, b->mat[VH_MLN_REDUCE_W], D, s.h, D, 0, err, err_size))) return st;
        vhc_bias_act(e->stream, s.h, b->vec[VH_MLN_REDUCE_B], NULL, s.h_bf16, R, D, 1);
        if ((st = vhc_linear(e->gemm, s.h_bf16, D, R, D, b->mat[VH_MLN_GAMMA_W], D, s.h, D, 0, err, err_size)) ||
            (st = vhc_linear(e->gemm, s.h_bf16, D, R, D, b->mat[VH_MLN_BETA_W], D, s.beta, D, 0, err, err_size)))
            return st;
        vhc_modulated_layernorm(e->stream, cuda_query_rows(e, d->inputs[0], f), s.h, b->vec[VH_MLN_GAMMA_B], s.beta,
                                b->vec[VH_MLN_BETA_B], cuda_query_rows(e, d->output, f), R, D, b->info.norm_eps);
    }
    return VH_OK;
}
