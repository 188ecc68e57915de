/*
 * VH_BLOCK_MLP_CHAIN on query sets on the CPU, per frame: its inputs' rows concatenated on
 * channels (or, gathering, the frame's images' tokens one image after another), then each layer
 * y = W x + b, its LayerNorm where norm_after says, and the activation between layers. The PETR
 * heads' small MLPs are instances: query_pos (Linear, ReLU, Linear), time_embedding (Linear,
 * LayerNorm), the class branch (Linear, LayerNorm, ReLU twice, Linear), the projections (Linear).
 */
#include <string.h>

#include "cpu_executor.h"

static int64_t widest(const cpu_block *b, int64_t in)
{
    int64_t w = in;
    for (uint32_t l = 0; l < b->info.chain_layers; l++)
        if (b->mat[VH_CHAIN_FC1_W + 2 * l].shape[0] > w) w = b->mat[VH_CHAIN_FC1_W + 2 * l].shape[0];
    return w;
}

static int64_t input_width(const cpu_block *b)
{
    return b->mat[VH_CHAIN_FC1_W].shape[1];
}

/* Scratch: the concatenated input and two buffers for the layers' outputs, [rows, widest] each. */
uint64_t cpu_query_chain_scratch_floats(const vh_executor *e, const cpu_block *b)
{
    const int64_t rows = cpu_query_set(e, b->desc->output).rows;
    return (uint64_t)(3 * rows * widest(b, input_width(b)));
}

/* The frame's input rows [rows, in] into dst: a single query input is read where it is. */
static const float *frame_input(vh_executor *e, const cpu_block *b, uint32_t f, float *dst)
{
    const vh_block_desc *d = b->desc;
    const vh_model_desc *m = e->model;
    const int64_t rows = cpu_query_set(e, d->output).rows, in = input_width(b);
    if (b->variant->gathers) {
        const uint32_t tower = m->slots[d->inputs[0]].tower;
        const int64_t tokens = m->towers[tower].n_patches, per_frame = rows / tokens;
        for (int64_t i = 0; i < per_frame; i++)
            memcpy(dst + i * tokens * in, cpu_tower_tokens(e, tower, f * per_frame + i),
                   sizeof(float) * (size_t)(tokens * in));
        return dst;
    }
    if (d->n_inputs == 1) return cpu_query_rows(e, d->inputs[0], f);
    int64_t col = 0;
    for (uint32_t i = 0; i < d->n_inputs; i++) {
        const int64_t w = cpu_query_set(e, d->inputs[i]).width;
        const float *src = cpu_query_rows(e, d->inputs[i], f);
        for (int64_t r = 0; r < rows; r++) memcpy(dst + r * in + col, src + r * w, sizeof(float) * (size_t)w);
        col += w;
    }
    return dst;
}

void cpu_query_chain(vh_executor *e, const cpu_block *b, const vh_batch *batch)
{
    const vh_block_desc *d = b->desc;
    const int64_t rows = cpu_query_set(e, d->output).rows, big = rows * widest(b, input_width(b));
    float *gathered = b->scratch, *ping = gathered + big, *pong = ping + big;
    const uint32_t n = b->info.chain_layers;
    for (uint32_t f = 0; f < batch->n_frames; f++) {
        const float *x = frame_input(e, b, f, gathered);
        int64_t in = input_width(b);
        for (uint32_t l = 0; l < n; l++) {
            const int64_t out = b->mat[VH_CHAIN_FC1_W + 2 * l].shape[0];
            float *y = l + 1 == n ? cpu_query_rows(e, d->output, f) : (l % 2 ? pong : ping);
            cpu_linear(e, b, VH_CHAIN_FC1_W + 2 * l, x, in, rows, b->vec[VH_CHAIN_FC1_B + 2 * l], y, out);
            if (b->info.chain_norm_after >> l & 1u)
                vhk_layernorm(e->pool, y, y, rows, out, b->vec[VH_CHAIN_NORM1_W + 2 * l],
                              b->vec[VH_CHAIN_NORM1_B + 2 * l], b->info.norm_eps);
            if (l + 1 < n) {
                if (b->info.chain_activation == VH_CHAIN_RELU) vhk_relu(e->pool, y, rows * out);
                else vhk_gelu_exact(e->pool, y, rows * out);
            }
            x = y;
            in = out;
        }
    }
}
