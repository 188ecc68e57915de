/*
 * A tower layer with 2-D RoPE on the CPU (VH_BLOCK_TRANSFORMER: pre-norm LayerNorm; attention over
 * the whole grid or within windows of it; interleaved 2-D RoPE on q and k; separate q, k, v; a
 * SiLU-gated MLP with biases and a LayerNorm of its hidden activations; EVA-02's blocks are
 * instances) over each image's grid of tokens:
 *
 *   n = norm1(x); windowed: the grid zero-padded to whole windows (after the norm, so a padded
 *   token's q, k, v are their biases, or 0)
 *   x += o(attention within each window (or the grid) of rope(q(n)), rope(k(n)), v(n)))
 *   x += down(sub_norm(silu(gate(norm2(x))) * up(norm2(x))))
 *
 * The padded tokens take part as keys and values (k = the k bias, or 0; v = the v bias), as in the
 * reference; as queries they are skipped, which is exact (the reference drops their outputs): the
 * q, k, v projections and the attention run on the real tokens only. The positions are each
 * token's row and column within its window.
 */
#include <math.h>
#include <string.h>

#include "cpu_executor.h"

/* The layer's geometry: windows of side w over a grid of side g padded to side P = ceil(g / w) w. */
typedef struct layer_shape {
    int64_t g, w, P, nw;               /* grid side, window side, padded side, windows a side */
    int64_t T, Tp;                     /* real and padded tokens */
    int64_t D, F, hd, heads;
} layer_shape;

static layer_shape shape_of(const vh_executor *e, const cpu_block *b)
{
    const vh_vit_desc *v = &e->model->towers[b->info.tower];
    layer_shape s = {.g = v->grid, .w = b->info.window ? b->info.window : v->grid, .D = v->embed_dim,
                     .F = v->mlp_hidden, .hd = v->head_dim, .heads = v->n_heads};
    s.nw = (s.g + s.w - 1) / s.w;
    s.P = s.nw * s.w;
    s.T = s.g * s.g;
    s.Tp = s.P * s.P;
    return s;
}

/* Scratch, in floats: q, k, v, out in window order [Tp, D]; the gate [T, F]; the RoPE tables
 * [w, hd / 4] x 2; the row and column of each padded token [Tp] x 2 (int32). */
uint64_t cpu_rope_tower_layer_scratch_floats(const vh_executor *e, const cpu_block *b)
{
    const layer_shape s = shape_of(e, b);
    return (uint64_t)(4 * s.Tp * s.D + s.T * s.F + 2 * s.w * (s.hd / 4) + 2 * s.Tp);
}

/* Window-order index of grid token (r, c) of the padded grid: window (r / w, c / w), then (r % w, c % w). */
static int64_t window_index(const layer_shape *s, int64_t r, int64_t c)
{
    return ((r / s->w) * s->nw + c / s->w) * s->w * s->w + (r % s->w) * s->w + c % s->w;
}

/* rows [Tp, D] in window order: the real tokens' `real` [T, D] rows where they go, `fill` (a bias,
 * or zeros when NULL) in the padded ones. */
static void scatter_padded(const layer_shape *s, const float *real, const float *fill, float *rows)
{
    for (int64_t r = 0; r < s->P; r++)
        for (int64_t c = 0; c < s->P; c++) {
            float *dst = rows + window_index(s, r, c) * s->D;
            if (r < s->g && c < s->g) memcpy(dst, real + (r * s->g + c) * s->D, sizeof(float) * (size_t)s->D);
            else if (fill) memcpy(dst, fill, sizeof(float) * (size_t)s->D);
            else memset(dst, 0, sizeof(float) * (size_t)s->D);
        }
}

void cpu_rope_tower_layer(vh_executor *e, const cpu_block *b, const vh_batch *batch)
{
    const layer_shape s = shape_of(e, b);
    const int64_t D = s.D, F = s.F, ww = s.w * s.w;
    vit_scratch *vs = &e->vit;
    float *q = b->scratch, *k = q + s.Tp * D, *v = k + s.Tp * D, *o = v + s.Tp * D, *gate = o + s.Tp * D;
    float *cos_t = gate + s.T * F, *sin_t = cos_t + s.w * (s.hd / 4);
    int32_t *row_of = (int32_t *)(sin_t + s.w * (s.hd / 4)), *col_of = row_of + s.Tp;

    vhk_rope_2d_table(s.w, b->info.rope_grid, s.hd, b->info.rope_theta, cos_t, sin_t);
    for (int64_t r = 0; r < s.P; r++)
        for (int64_t c = 0; c < s.P; c++) {
            const int64_t i = window_index(&s, r, c);
            row_of[i] = (int32_t)(r % s.w);
            col_of[i] = (int32_t)(c % s.w);
        }

    for (uint32_t image = 0; image < batch->n_images; image++) {
        float *x = cpu_tower_tokens(e, b->info.tower, image);
        vhk_layernorm(e->pool, x, vs->norm, s.T, D, b->vec[VH_TF_ATTN_NORM_W], b->vec[VH_TF_ATTN_NORM_B],
                      b->info.norm_eps);
        /* q, k, v of the real tokens (vs->proj, vs->attn as [T, D] staging), then in window order */
        cpu_linear(e, b, VH_TF_Q_W, vs->norm, D, s.T, b->vec[VH_TF_Q_B], vs->proj, D);
        scatter_padded(&s, vs->proj, b->vec[VH_TF_Q_B], q);
        cpu_linear(e, b, VH_TF_K_W, vs->norm, D, s.T, b->vec[VH_TF_K_B], vs->proj, D);
        scatter_padded(&s, vs->proj, b->vec[VH_TF_K_B], k);
        cpu_linear(e, b, VH_TF_V_W, vs->norm, D, s.T, b->vec[VH_TF_V_B], vs->proj, D);
        scatter_padded(&s, vs->proj, b->vec[VH_TF_V_B], v);
        vhk_rope_2d(e->pool, q, D, s.Tp, s.heads, s.hd, row_of, col_of, cos_t, sin_t);
        vhk_rope_2d(e->pool, k, D, s.Tp, s.heads, s.hd, row_of, col_of, cos_t, sin_t);
        /* each window's real queries against all its keys (padded ones too): a window of the last
         * row or column of windows holds rr x cc real tokens; a full-width run of rows is one call */
        for (int64_t win = 0; win < s.nw * s.nw; win++) {
            const int64_t rr = s.g - (win / s.nw) * s.w < s.w ? s.g - (win / s.nw) * s.w : s.w;
            const int64_t cc = s.g - (win % s.nw) * s.w < s.w ? s.g - (win % s.nw) * s.w : s.w;
            for (int64_t r = 0; r < rr; r += cc == s.w ? rr : 1) {
                const int64_t first = win * ww + r * s.w;
                vhk_attention_args a = {
                    .q = q + first * D, .q_stride = D, .k = k + win * ww * D, .v = v + win * ww * D,
                    .kv_stride = D, .out = o + first * D, .out_stride = D, .n_rows = cc == s.w ? rr * s.w : cc,
                    .n_kv = ww, .n_heads = s.heads, .n_kv_heads = s.heads, .head_dim = s.hd, .first_position = 0,
                    .causal = 0, .scale = (float)(1.0 / sqrt((double)s.hd)),
                };
                vhk_attention(e->pool, &a);
            }
        }
        /* back to grid order, padded queries dropped */
        for (int64_t r = 0; r < s.g; r++)
            for (int64_t c = 0; c < s.g; c++)
                memcpy(vs->attn + (r * s.g + c) * D, o + window_index(&s, r, c) * D, sizeof(float) * (size_t)D);
        cpu_linear(e, b, VH_TF_O_W, vs->attn, D, s.T, b->vec[VH_TF_O_B], vs->proj, D);
        vhk_add(e->pool, x, vs->proj, s.T * D);

        vhk_layernorm(e->pool, x, vs->norm, s.T, D, b->vec[VH_TF_MLP_NORM_W], b->vec[VH_TF_MLP_NORM_B],
                      b->info.norm_eps);
        cpu_linear(e, b, VH_TF_GATE_W, vs->norm, D, s.T, b->vec[VH_TF_GATE_B], gate, F);
        cpu_linear(e, b, VH_TF_UP_W, vs->norm, D, s.T, b->vec[VH_TF_UP_B], vs->mlp, F);
        vhk_silu_mul(e->pool, gate, vs->mlp, vs->mlp, s.T * F);
        vhk_layernorm(e->pool, vs->mlp, gate, s.T, F, b->vec[VH_TF_SUB_NORM_W], b->vec[VH_TF_SUB_NORM_B],
                      b->info.norm_eps);
        cpu_linear(e, b, VH_TF_DOWN_W, gate, F, s.T, b->vec[VH_TF_DOWN_B], vs->proj, D);
        vhk_add(e->pool, x, vs->proj, s.T * D);
    }
}
