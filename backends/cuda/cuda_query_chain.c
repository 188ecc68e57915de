/*
 * VH_BLOCK_MLP_CHAIN on query sets on the GPU, per frame (backends/cpu_common/cpu_query_chain.c is
 * the CPU's): its inputs' rows side by side on channels (or, gathering, the frame's images' tokens
 * one image after another) in bf16, then each layer y = W x + b on cuBLASLt, its LayerNorm where
 * norm_after says, and the activation between layers; the last layer's output, fp32, is the
 * output query set. The PETR heads' small MLPs and the 3-D position encoder are instances.
 */
#include "backend_error.h"
#include "cuda_executor.h"
#include "cuda_memory_plan.h"

static int64_t input_width(const cuda_block *b) { return b->t[VH_CHAIN_FC1_W].shape[1]; }

static int64_t widest(const cuda_block *b)
{
    int64_t w = 0;
    for (uint32_t l = 0; l < b->info.chain_layers; l++)
        if (b->t[VH_CHAIN_FC1_W + 2 * l].shape[0] > w) w = b->t[VH_CHAIN_FC1_W + 2 * l].shape[0];
    return w;
}

typedef struct chain_scratch {
    vhc_bf16 *in;                      /* [rows, input width] the first layer's input */
    float *y;                          /* [rows, widest] a layer's output */
    vhc_bf16 *act;                     /* [rows, widest] the next layer's input */
} chain_scratch;

static size_t carve(const vh_executor *e, const cuda_block *b, char *base, chain_scratch *s)
{
    const int64_t rows = cuda_query_set(e, b->desc->output).rows, w = widest(b);
    cuda_arena a = {.base = base};
    s->in = cuda_arena_take(&a, (size_t)(rows * input_width(b)) * 2);
    s->y = cuda_arena_take(&a, (size_t)(rows * w) * 4);
    s->act = cuda_arena_take(&a, (size_t)(rows * w) * 2);
    return a.used;
}

size_t cuda_query_chain_scratch_bytes(const vh_executor *e, const cuda_block *b)
{
    chain_scratch s;
    return carve(e, b, NULL, &s);
}

/* Frame f's input rows into in, bf16. */
static void frame_input(vh_executor *e, const cuda_block *b, uint32_t f, vhc_bf16 *in)
{
    const vh_block_desc *d = b->desc;
    const vh_model_desc *m = e->model;
    const int64_t rows = cuda_query_set(e, d->output).rows, width = input_width(b);
    if (b->variant->gathers) {
        const uint32_t tower = m->slots[d->inputs[0]].tower;
        const int64_t tokens = m->towers[tower].n_patches, per_frame = rows / tokens;
        for (int64_t i = 0; i < per_frame; i++)
            vhc_f32_to_bf16(e->stream, cuda_tower_tokens(e, tower, (uint32_t)(f * per_frame + i)),
                            in + i * tokens * width, tokens * width);
        return;
    }
    int col = 0;
    for (uint32_t i = 0; i < d->n_inputs; i++) {
        const int w = (int)cuda_query_set(e, d->inputs[i]).width;
        vhc_copy_cols_bf16(e->stream, cuda_query_rows(e, d->inputs[i], f), rows, w, in, width, col);
        col += w;
    }
}

vh_status cuda_query_chain_check(const vh_executor *e, const cuda_block *b, char *err, size_t err_size)
{
    const vh_block_desc *d = b->desc;
    if (widest(b) > VHC_ROWS_FINISH_MAX_COLS)
        return vh_backend_fail(err, err_size, VH_ERR_UNSUPPORTED, "cuda: block %u: an MLP chain %lld wide: the GPU's "
                               "takes up to %d", (unsigned)(d - e->model->blocks), (long long)widest(b),
                               VHC_ROWS_FINISH_MAX_COLS);
    if (b->variant->gathers && (e->model->towers[e->model->slots[d->inputs[0]].tower].n_prefix ||
                                !vh_block_variants_held(e->model, e->params.first_block, e->params.n_blocks).in_tower))
        return vh_backend_fail(err, err_size, VH_ERR_UNSUPPORTED, "cuda: block %u: gathers the tokens of a tower with "
                               "prefix tokens, or of a tower this executor does not run",
                               (unsigned)(d - e->model->blocks));
    return VH_OK;
}

vh_status cuda_query_chain(vh_executor *e, const cuda_block *b, const vh_batch *batch, char *err, size_t err_size)
{
    const vh_block_desc *d = b->desc;
    const int rows = (int)cuda_query_set(e, d->output).rows;
    const uint32_t n = b->info.chain_layers;
    chain_scratch s;
    carve(e, b, e->queries.scratch, &s);
    for (uint32_t f = 0; f < batch->n_frames; f++) {
        VHC_MARK(e, "query.chain", rows);
        frame_input(e, b, f, s.in);
        const vhc_bf16 *x = s.in;
        int64_t in = input_width(b);
        for (uint32_t l = 0; l < n; l++) {
            const int64_t out = b->t[VH_CHAIN_FC1_W + 2 * l].shape[0];
            const int last = l + 1 == n;
            const float *gamma = b->info.chain_norm_after >> l & 1u ? b->vec[VH_CHAIN_NORM1_W + 2 * l] : NULL;
            float *y = last ? cuda_query_rows(e, d->output, f) : s.y;
            vh_status st = vhc_linear(e->gemm, x, in, rows, in, b->mat[VH_CHAIN_FC1_W + 2 * l], out, y, out, 0, err,
                                      err_size);
            if (st) return st;
            const int act = last ? VHC_ACT_NONE : b->info.chain_activation == VH_CHAIN_RELU ? VHC_ACT_RELU : VHC_ACT_GELU;
            vhc_rows_finish(e->stream, y, b->vec[VH_CHAIN_FC1_B + 2 * l], gamma, b->vec[VH_CHAIN_NORM1_B + 2 * l],
                            b->info.norm_eps, act, last ? y : NULL, last ? NULL : s.act, rows, (int)out);
            x = s.act;
            in = out;
        }
    }
    return VH_OK;
}
