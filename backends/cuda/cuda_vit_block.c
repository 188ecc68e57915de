/*
 * A tower's layer on the GPU (VH_BLOCK_TRANSFORMER: pre-norm LayerNorm, full attention, fused
 * q|k|v, GELU MLP, biases, optional LayerScale) over all images of a batch. The towers run one after the other on the executor's stream,
 * sharing one scratch (cuda_executor.h).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cuda_executor.h"

/* timm Block: x = x + ls1 * proj(attn(norm1(x))); x = x + ls2 * fc2(gelu(fc1(norm2(x))))
 * The images' tokens are contiguous, so every row-wise step and GEMM runs once over all images
 * (M = images x T: several frames' towers at GEMM sizes nearer the GPU's peak); attention takes
 * every image in one launch where the flash kernel serves the shape, else one call per image. */
vh_status cuda_vit_block(vh_executor *e, const cuda_block *b, const vh_batch *batch, char *err, size_t err_size)
{
    const uint32_t t = b->info.tower;
    const vh_vit_desc *v = &e->model->towers[t];
    const int D = (int)v->embed_dim, H = (int)v->mlp_hidden, T = (int)(v->n_prefix + v->n_patches);
    const int R = (int)batch->n_images * T;
    vit_scratch *s = &e->vit.scratch;
    const float scale = (float)(1.0 / sqrt((double)v->head_dim));
    float *x = cuda_tower_tokens(e, t, 0);
    vh_status st;
    VHC_MARK(e, "vit.norm", R);
    vhc_layernorm_bf16(e->stream, x, b->vec[VH_TF_ATTN_NORM_W], b->vec[VH_TF_ATTN_NORM_B], s->xn, R, D, b->info.norm_eps);
    VHC_MARK(e, "vit.qkv", R);
    if ((st = vhc_linear(e->gemm, s->xn, D, R, D, b->mat[VH_TF_QKV_W], 3 * D, s->qkv, 3 * D, 0, err, err_size)))
        return st;
    VHC_MARK(e, "vit.qkv_split", R);
    vhc_vit_qkv_split(e->stream, s->qkv, b->vec[VH_TF_QKV_B], s->q, s->k, s->v, R, D);
    VHC_MARK(e, "vit.attention", R);
    const int64_t image_stride = (int64_t)T * D;
    if (vhc_flash_attention_supported(s->q, D, s->k, s->v, D, D, (int)v->n_heads, (int)v->n_heads, (int)v->head_dim) &&
        image_stride % 8 == 0) { /* every image in one launch: one image's 16 heads fill few SMs */
        vhc_flash_attention_batch(e->stream, s->q, D, s->k, s->v, D, s->attn, D, T, (int)v->n_heads, (int)v->n_heads,
                                  (int)v->head_dim, scale, T, -1, (int)batch->n_images, image_stride);
    } else {
        for (uint32_t i = 0; i < batch->n_images; i++) {
            const int64_t at = (int64_t)i * image_stride;
            vhc_attention(e->stream, s->q + at, D, s->k + at, s->v + at, D, NULL, T, s->attn + at, D, T,
                          (int)v->n_heads, (int)v->n_heads, (int)v->head_dim, scale);
        }
    }
    VHC_MARK(e, "vit.proj", R);
    if ((st = vhc_linear(e->gemm, s->attn, D, R, D, b->mat[VH_TF_O_W], D, s->tmp, D, 0, err, err_size)))
        return st;
    VHC_MARK(e, "vit.residual", R);
    vhc_residual_add(e->stream, x, s->tmp, b->vec[VH_TF_O_B], b->vec[VH_TF_LS1], R, D);

    VHC_MARK(e, "vit.norm", R);
    vhc_layernorm_bf16(e->stream, x, b->vec[VH_TF_MLP_NORM_W], b->vec[VH_TF_MLP_NORM_B], s->xn, R, D, b->info.norm_eps);
    VHC_MARK(e, "vit.fc1", R);
    if ((st = vhc_linear(e->gemm, s->xn, D, R, D, b->mat[VH_TF_UP_W], H, s->mlp, H, 0, err, err_size))) return st;
    VHC_MARK(e, "vit.gelu", R);
    vhc_bias_gelu_bf16(e->stream, s->mlp, b->vec[VH_TF_UP_B], s->mlp_bf16, R, H);
    VHC_MARK(e, "vit.fc2", R);
    if ((st = vhc_linear(e->gemm, s->mlp_bf16, H, R, H, b->mat[VH_TF_DOWN_W], D, s->tmp, D, 0, err, err_size)))
        return st;
    VHC_MARK(e, "vit.residual", R);
    vhc_residual_add(e->stream, x, s->tmp, b->vec[VH_TF_DOWN_B], b->vec[VH_TF_LS2], R, D);
    return VH_OK;
}

