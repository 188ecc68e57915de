/*
 * The vision side on the GPU: timm ViT blocks (DINOv2 with registers and LayerScale, SigLIP) and
 * Prismatic's MLP projector. Per image: T = prefix + patches tokens of width D. The towers run one
 * after the other on the executor's stream, sharing one scratch (cuda_executor.h).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cuda_executor.h"

static float *tower_tokens(vh_executor *e, uint32_t t, uint32_t image)
{
    const vh_vit_desc *v = &e->model->towers[t];
    return e->vit.x[t] + (size_t)image * (v->n_prefix + v->n_patches) * v->embed_dim;
}

/* patch_embed (im2col + GEMM), then [cls, reg..., patches] with position embeddings. */
vh_status cuda_vit_embed(vh_executor *e, const cuda_block *b, const vh_batch *batch, char *err, size_t err_size)
{
    const uint32_t t = b->desc->tower;
    const vh_vit_desc *v = &e->model->towers[t];
    const int D = (int)v->embed_dim, P = (int)v->patch_size, S = (int)v->image_size, NP = (int)v->n_patches;
    const int K = VHC_PATCH_LD(P); /* the weight's rows are padded alike at upload */
    vit_scratch *s = &e->vit.scratch;
    for (uint32_t i = 0; i < batch->n_images; i++) {
        const float *pixels = e->vit.pixels + i * e->vit.pixel_floats + e->vit.tower_pixels[t]; /* uploaded */
        VHC_MARK(e, "vit.embed im2col", NP);
        vhc_im2col_bf16(e->stream, pixels, S, P, s->patches, K);
        VHC_MARK(e, "vit.embed gemm", NP);
        vh_status st = vhc_linear(e->gemm, s->patches, K, NP, K, b->mat[VH_VIT_EMBED_PATCH_W], D, s->tmp, D, 0,
                                  err, err_size);
        if (st) return st;
        const int pos_covers_prefix = v->pos_embed_prefix ? 1 : 0;
        VHC_MARK(e, "vit.embed assemble", NP);
        vhc_vit_assemble(e->stream, s->tmp, b->vec[VH_VIT_EMBED_PATCH_B], b->vec[VH_VIT_EMBED_CLS],
                         b->vec[VH_VIT_EMBED_REG], (int)v->n_registers, b->vec[VH_VIT_EMBED_POS], pos_covers_prefix,
                         tower_tokens(e, t, i), NP, D);
    }
    return VH_OK;
}

/* timm Block: x = x + ls1 * proj(attn(norm1(x))); x = x + ls2 * fc2(gelu(fc1(norm2(x))))
 * The images' tokens are contiguous, so every row-wise step and GEMM runs once over all images
 * (M = images x T: several frames' towers at GEMM sizes nearer the GPU's peak); attention takes
 * every image in one launch where the flash kernel serves the shape, else one call per image. */
vh_status cuda_vit_block(vh_executor *e, const cuda_block *b, const vh_batch *batch, char *err, size_t err_size)
{
    const uint32_t t = b->desc->tower;
    const vh_vit_desc *v = &e->model->towers[t];
    const int D = (int)v->embed_dim, H = (int)v->mlp_hidden, T = (int)(v->n_prefix + v->n_patches);
    const int R = (int)batch->n_images * T;
    vit_scratch *s = &e->vit.scratch;
    const float scale = (float)(1.0 / sqrt((double)v->head_dim));
    float *x = tower_tokens(e, t, 0);
    vh_status st;
    VHC_MARK(e, "vit.norm", R);
    vhc_layernorm_bf16(e->stream, x, b->vec[VH_VIT_NORM1_W], b->vec[VH_VIT_NORM1_B], s->xn, R, D, v->norm_eps);
    VHC_MARK(e, "vit.qkv", R);
    if ((st = vhc_linear(e->gemm, s->xn, D, R, D, b->mat[VH_VIT_QKV_W], 3 * D, s->qkv, 3 * D, 0, err, err_size)))
        return st;
    VHC_MARK(e, "vit.qkv_split", R);
    vhc_vit_qkv_split(e->stream, s->qkv, b->vec[VH_VIT_QKV_B], s->q, s->k, s->v, R, D);
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
    if ((st = vhc_linear(e->gemm, s->attn, D, R, D, b->mat[VH_VIT_PROJ_W], D, s->tmp, D, 0, err, err_size)))
        return st;
    VHC_MARK(e, "vit.residual", R);
    vhc_residual_add(e->stream, x, s->tmp, b->vec[VH_VIT_PROJ_B], b->vec[VH_VIT_LS1], R, D);

    VHC_MARK(e, "vit.norm", R);
    vhc_layernorm_bf16(e->stream, x, b->vec[VH_VIT_NORM2_W], b->vec[VH_VIT_NORM2_B], s->xn, R, D, v->norm_eps);
    VHC_MARK(e, "vit.fc1", R);
    if ((st = vhc_linear(e->gemm, s->xn, D, R, D, b->mat[VH_VIT_FC1_W], H, s->mlp, H, 0, err, err_size))) return st;
    VHC_MARK(e, "vit.gelu", R);
    vhc_bias_gelu_bf16(e->stream, s->mlp, b->vec[VH_VIT_FC1_B], s->mlp_bf16, R, H);
    VHC_MARK(e, "vit.fc2", R);
    if ((st = vhc_linear(e->gemm, s->mlp_bf16, H, R, H, b->mat[VH_VIT_FC2_W], D, s->tmp, D, 0, err, err_size)))
        return st;
    VHC_MARK(e, "vit.residual", R);
    vhc_residual_add(e->stream, x, s->tmp, b->vec[VH_VIT_FC2_B], b->vec[VH_VIT_LS2], R, D);
    return VH_OK;
}

/* PrismaticProjector on the towers' patch tokens, concatenated on channels; all images' rows
 * at once (image i's patch embeddings at patch_embeds + i N Dl). */
vh_status cuda_projector(vh_executor *e, const cuda_block *b, const vh_batch *batch, char *err, size_t err_size)
{
    const vh_model_desc *m = e->model;
    const int N = (int)m->n_image_tokens, Dv = (int)m->vision_dim, H1 = (int)m->projector_hidden;
    const int Dl = (int)m->llm.hidden, R = (int)batch->n_images * N;
    projector_buffers *p = &e->proj;
    vh_status st;
    VHC_MARK(e, "projector gather", R);
    for (uint32_t i = 0; i < batch->n_images; i++) {
        int col = 0;
        for (uint32_t t = 0; t < m->n_towers; t++) {
            const vh_vit_desc *v = &m->towers[t];
            vhc_gather_patches_bf16(e->stream, tower_tokens(e, t, i), (int)v->n_prefix, N, (int)v->embed_dim,
                                    p->in + (size_t)i * N * Dv, col, Dv);
            col += (int)v->embed_dim;
        }
    }
    float *out = p->patch_embeds;
    VHC_MARK(e, "projector gemms", R);
    if ((st = vhc_linear(e->gemm, p->in, Dv, R, Dv, b->mat[VH_PROJ_FC1_W], H1, p->h1, H1, 0, err, err_size)))
        return st;
    vhc_bias_gelu_bf16(e->stream, p->h1, b->vec[VH_PROJ_FC1_B], p->h1_bf16, R, H1);
    if (m->projector_layers == 3) {
        if ((st = vhc_linear(e->gemm, p->h1_bf16, H1, R, H1, b->mat[VH_PROJ_FC2_W], Dl, p->h2, Dl, 0, err, err_size)))
            return st;
        vhc_bias_gelu_bf16(e->stream, p->h2, b->vec[VH_PROJ_FC2_B], p->h2_bf16, R, Dl);
        if ((st = vhc_linear(e->gemm, p->h2_bf16, Dl, R, Dl, b->mat[VH_PROJ_FC3_W], Dl, out, Dl, 0, err, err_size)))
            return st;
        vhc_bias_add_f32(e->stream, out, b->vec[VH_PROJ_FC3_B], out, R, Dl);
    } else {
        if ((st = vhc_linear(e->gemm, p->h1_bf16, H1, R, H1, b->mat[VH_PROJ_FC2_W], Dl, out, Dl, 0, err, err_size)))
            return st;
        vhc_bias_add_f32(e->stream, out, b->vec[VH_PROJ_FC2_B], out, R, Dl);
    }
    return VH_OK;
}
