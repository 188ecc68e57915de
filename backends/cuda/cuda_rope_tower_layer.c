/*
 * A tower layer with 2-D RoPE on the GPU (VH_BLOCK_TRANSFORMER: pre-norm LayerNorm; attention over
 * the whole grid or within windows of it; interleaved 2-D RoPE on q and k; separate q, k, v; a
 * SiLU-gated MLP with biases and a LayerNorm of its hidden activations; EVA-02's blocks), over all
 * images of the batch at once (backends/cpu_common/cpu_rope_tower_layer.c is the CPU's):
 *
 *   n = norm1(x)                                  bf16, every image's tokens: one GEMM for q|k|v
 *   q, k, v in window order, the grid zero-padded to whole windows after the norm (a padded token's
 *   q, k, v are their biases, or 0), q and k rotated by the token's place in its window (the
 *   layer's rotation table computed once, then read by every token)
 *   x += o(attention within each window)          every window of every image in one flash launch;
 *                                                 the add and o's bias in o's GEMM epilogue
 *   x += down(sub_norm(silu(gate(norm2(x))) * up(norm2(x))))   the add and bias in down's epilogue
 *
 * q|k|v and gate|up stay fp32 out of their GEMMs: rounded to bf16 there as well, the ViT's error at
 * the agent's geometry rose from 2.9e-2 to 3.9e-2 of the largest value and the whole front end's
 * from 1.2e-1 to 1.6e-1, past its bound (H100, 2026-12-07).
 *
 * Padded tokens take part as keys and values, as in the reference. Their query rows are computed
 * and dropped (the window gather keeps the real tokens): at the agent's geometry 2304 rows for
 * 1600, a third of the attention's work, which the CPU's layer skips; the GEMMs run on the real
 * tokens only, over the weights cuda_rope_tower_pack.c lays out (q|k|v one matrix, the MLP padded
 * to a multiple of 8).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend_error.h"
#include "cuda_executor.h"
#include "cuda_rope_tower_pack.h"

vh_status cuda_rope_tower_layer_check(const vh_executor *e, const cuda_block *b, char *err, size_t err_size)
{
    const vh_vit_desc *v = &e->model->towers[b->info.tower];
    const int D = (int)v->embed_dim, F = (int)v->mlp_hidden, hd = (int)v->head_dim;
    if (D % 8 || hd % 8 || hd > 128 || F > VHC_SWIGLU_MAX_F || v->n_prefix)
        return vh_backend_fail(err, err_size, VH_ERR_UNSUPPORTED, "cuda: block %u: a width of %d in heads of %d, an MLP "
                               "of %d and %u prefix tokens: the GPU's tower layer with 2-D RoPE takes widths of "
                               "multiples of 8, heads of multiples of 8 up to 128, MLPs up to %d, no prefix",
                               (unsigned)(b->desc - e->model->blocks), D, hd, F, v->n_prefix, VHC_SWIGLU_MAX_F);
    return VH_OK;
}

vh_status cuda_rope_tower_layer(vh_executor *e, const cuda_block *b, const vh_batch *batch, char *err,
                                size_t err_size)
{
    const uint32_t t = b->info.tower;
    const vh_vit_desc *v = &e->model->towers[t];
    const int D = (int)v->embed_dim, F = (int)v->mlp_hidden, g = (int)v->grid, heads = (int)v->n_heads;
    const int hd = (int)v->head_dim, images = (int)batch->n_images, T = g * g;
    const int w = b->info.window ? (int)b->info.window : g, nw = (g + w - 1) / w, ww = w * w, Tp = nw * w * nw * w;
    const int R = images * T;
    const int64_t f_ld = cuda_rope_tower_padded_mlp(F); /* the MLP's padded width (cuda_rope_tower_pack.c) */
    vit_scratch *s = &e->vit.scratch;
    const float scale = (float)(1.0 / sqrt((double)hd));
    float *x = cuda_tower_tokens(e, t, 0);
    vh_status st;

    VHC_MARK(e, "eva.norm", R);
    vhc_layernorm_bf16(e->stream, x, b->vec[VH_TF_ATTN_NORM_W], b->vec[VH_TF_ATTN_NORM_B], s->xn, R, D, b->info.norm_eps);
    /* q | k | v of the real tokens side by side in s->qkv (one GEMM; fp32, so that q and k are
     * rounded to bf16 once, after their bias and rotation), then each into window order */
    VHC_MARK(e, "eva.qkv", R);
    const int biases[3] = {VH_TF_Q_B, VH_TF_K_B, VH_TF_V_B};
    vhc_bf16 *dst[3] = {s->q, s->k, s->v};
    if ((st = vhc_linear(e->gemm, s->xn, D, R, D, b->qkv_w, 3 * D, s->qkv, 3 * D, 0, err, err_size))) return st;
    VHC_MARK(e, "eva.window_rope", R);
    vhc_rope_table(e->stream, s->rope, w, hd, (int)b->info.rope_grid, b->info.rope_theta);
    for (int p = 0; p < 3; p++)
        vhc_window_scatter(e->stream, s->qkv + p * D, 3 * D, b->vec[biases[p]], dst[p], images, g, w, D, heads,
                           p < 2 ? s->rope : NULL);
    VHC_MARK(e, "eva.attention", images * Tp);
    vhc_flash_attention_batch(e->stream, s->q, D, s->k, s->v, D, s->attn, D, ww, heads, heads, hd, scale, ww, -1,
                              images * nw * nw, (int64_t)ww * D);
    VHC_MARK(e, "eva.window_gather", R);
    vhc_window_gather(e->stream, s->attn, s->xn, images, g, w, D); /* xn is free again: the gathered rows */
    /* x += o(attn) + o_bias in the GEMM's epilogue (s->tmp: where its algorithm search may write) */
    VHC_MARK(e, "eva.proj_residual", R);
    if ((st = vhc_linear_to(e->gemm, s->xn, D, R, D, b->mat[VH_TF_O_W], D,
                            &(vhc_linear_out){.D = x, .ldd = D, .accumulate = 1, .bias = b->vec[VH_TF_O_B],
                                              .tune_scratch = s->tmp},
                            err, err_size)))
        return st;

    VHC_MARK(e, "eva.norm", R);
    vhc_layernorm_bf16(e->stream, x, b->vec[VH_TF_MLP_NORM_W], b->vec[VH_TF_MLP_NORM_B], s->xn, R, D, b->info.norm_eps);
    VHC_MARK(e, "eva.gate_up", R);
    if ((st = vhc_linear(e->gemm, s->xn, D, R, D, b->gate_up_w, 2 * f_ld, s->mlp, 2 * f_ld, 0, err, err_size)))
        return st;
    VHC_MARK(e, "eva.swiglu_subnorm", R);
    vhc_swiglu_layernorm_bf16(e->stream, s->mlp, 2 * f_ld, (int)f_ld, b->vec[VH_TF_GATE_B], b->vec[VH_TF_UP_B],
                              b->vec[VH_TF_SUB_NORM_W], b->vec[VH_TF_SUB_NORM_B], s->mlp_bf16, f_ld, R, F,
                              b->info.norm_eps);
    VHC_MARK(e, "eva.down_residual", R);
    if ((st = vhc_linear_to(e->gemm, s->mlp_bf16, f_ld, R, f_ld, b->mat[VH_TF_DOWN_W], D,
                            &(vhc_linear_out){.D = x, .ldd = D, .accumulate = 1, .bias = b->vec[VH_TF_DOWN_B],
                                              .tune_scratch = s->tmp},
                            err, err_size)))
        return st;
    return VH_OK;
}
