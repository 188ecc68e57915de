/*
 * The vision side of OpenVLA on the CPU: timm ViT blocks (DINOv2 with registers and LayerScale,
 * SigLIP) and Prismatic's MLP projector. Shapes per image: T = prefix + patches tokens of width D.
 */
#include <math.h>
#include <string.h>

#include "cpu_executor.h"

static const vh_tensor_view *W(const cpu_block *b, int i) { return &b->desc->tensors[i]; }

/* Tokens of tower t for image i: [n_prefix + n_patches, D]. */
static float *tower_tokens(vh_executor *e, uint32_t t, uint32_t image)
{
    const vh_vit_desc *v = &e->model->towers[t];
    return e->vit_tokens[t] + (size_t)image * (v->n_prefix + v->n_patches) * v->embed_dim;
}

/* patch_embed (a P x P stride-P convolution, as im2col + GEMM), then class/register tokens and
 * position embeddings in timm's order: [cls, reg..., patches]. */
void cpu_vit_embed(vh_executor *e, const cpu_block *b, const vh_batch *batch)
{
    const uint32_t t = b->desc->tower;
    const vh_vit_desc *v = &e->model->towers[t];
    const int64_t D = v->embed_dim, P = v->patch_size, NP = v->n_patches, R = v->n_registers;
    const int64_t prefix = v->n_prefix;
    float *pos = NULL; /* fp32 position embeddings, converted per call (small: L x D) */

    for (uint32_t i = 0; i < batch->n_images; i++) {
        float *x = tower_tokens(e, t, i);
        const float *pixels = batch->pixels[(size_t)i * e->model->n_towers + t];
        vhk_im2col_patches(pixels, v->image_size, P, e->vit.patches);
        cpu_linear(e, b, VH_VIT_EMBED_PATCH_W, e->vit.patches, 3 * P * P, NP, b->vec[VH_VIT_EMBED_PATCH_B], x + prefix * D, D);
        if (v->has_class_token)
            vhk_convert_to_f32(W(b, VH_VIT_EMBED_CLS)->data, W(b, VH_VIT_EMBED_CLS)->dtype, x, D);
        if (R) vhk_convert_to_f32(W(b, VH_VIT_EMBED_REG)->data, W(b, VH_VIT_EMBED_REG)->dtype,
                                  x + (int64_t)v->has_class_token * D, R * D);
        /* pos_embed covers the patches only (DINOv2: add, then prepend), or every token (add after
         * the concatenation). Either way it lines up with the tail of the token array. */
        const vh_tensor_view *pe = W(b, VH_VIT_EMBED_POS);
        const int64_t L = pe->shape[1];
        float *dst = x + (prefix + NP - L) * D;
        pos = e->vit.proj; /* scratch of at least T x D floats */
        vhk_convert_to_f32(pe->data, pe->dtype, pos, L * D);
        vhk_add(e->pool, dst, pos, L * D);
    }
}

/* timm Block: x = x + ls1 * attn(norm1(x)); x = x + ls2 * mlp(norm2(x)) */
void cpu_vit_block(vh_executor *e, const cpu_block *b, const vh_batch *batch)
{
    const uint32_t t = b->desc->tower;
    const vh_vit_desc *v = &e->model->towers[t];
    const int64_t D = v->embed_dim, H = v->mlp_hidden, T = v->n_prefix + v->n_patches;
    vit_scratch *s = &e->vit;

    for (uint32_t i = 0; i < batch->n_images; i++) {
        float *x = tower_tokens(e, t, i);

        vhk_layernorm(e->pool, x, s->norm, T, D, b->vec[VH_VIT_NORM1_W], b->vec[VH_VIT_NORM1_B], v->norm_eps);
        cpu_linear(e, b, VH_VIT_QKV_W, s->norm, D, T, b->vec[VH_VIT_QKV_B], s->qkv, 3 * D);
        /* qkv rows are [q | k | v], each [heads, head_dim]: attention over all T tokens */
        vhk_attention_args a = {
            .q = s->qkv, .q_stride = 3 * D, .k = s->qkv + D, .v = s->qkv + 2 * D, .kv_stride = 3 * D,
            .out = s->attn, .out_stride = D, .n_rows = T, .n_kv = T, .n_heads = v->n_heads,
            .n_kv_heads = v->n_heads, .head_dim = v->head_dim, .first_position = 0, .causal = 0,
            .scale = (float)(1.0 / sqrt((double)v->head_dim)),
        };
        vhk_attention(e->pool, &a);
        cpu_linear(e, b, VH_VIT_PROJ_W, s->attn, D, T, b->vec[VH_VIT_PROJ_B], s->proj, D);
        vhk_add_scaled(e->pool, x, s->proj, b->vec[VH_VIT_LS1], T, D);

        vhk_layernorm(e->pool, x, s->norm, T, D, b->vec[VH_VIT_NORM2_W], b->vec[VH_VIT_NORM2_B], v->norm_eps);
        cpu_linear(e, b, VH_VIT_FC1_W, s->norm, D, T, b->vec[VH_VIT_FC1_B], s->mlp, H);
        vhk_gelu_exact(e->pool, s->mlp, T * H);
        cpu_linear(e, b, VH_VIT_FC2_W, s->mlp, H, T, b->vec[VH_VIT_FC2_B], s->proj, D);
        vhk_add_scaled(e->pool, x, s->proj, b->vec[VH_VIT_LS2], T, D);
    }
}

/* PrismaticProjector: the towers' patch tokens (prefix dropped) concatenated on channels, then
 * fc1 -> GELU -> fc2 (-> GELU -> fc3 for the fused backbone). */
void cpu_projector(vh_executor *e, const cpu_block *b, const vh_batch *batch)
{
    const vh_model_desc *m = e->model;
    const int64_t N = m->n_image_tokens, Dv = m->vision_dim, H1 = m->projector_hidden, Dl = m->llm.hidden;

    for (uint32_t i = 0; i < batch->n_images; i++) {
        int64_t col = 0;
        for (uint32_t t = 0; t < m->n_towers; t++) {
            const vh_vit_desc *v = &m->towers[t];
            const float *patches = tower_tokens(e, t, i) + (int64_t)v->n_prefix * v->embed_dim;
            for (int64_t r = 0; r < N; r++)
                memcpy(e->proj_in + r * Dv + col, patches + r * v->embed_dim, sizeof(float) * v->embed_dim);
            col += v->embed_dim;
        }
        float *out = e->patch_embeds + (size_t)i * N * Dl;
        cpu_linear(e, b, VH_PROJ_FC1_W, e->proj_in, Dv, N, b->vec[VH_PROJ_FC1_B], e->proj_hidden, H1);
        vhk_gelu_exact(e->pool, e->proj_hidden, N * H1);
        if (m->projector_layers == 3) {
            cpu_linear(e, b, VH_PROJ_FC2_W, e->proj_hidden, H1, N, b->vec[VH_PROJ_FC2_B], e->proj_out, Dl);
            vhk_gelu_exact(e->pool, e->proj_out, N * Dl);
            cpu_linear(e, b, VH_PROJ_FC3_W, e->proj_out, Dl, N, b->vec[VH_PROJ_FC3_B], out, Dl);
        } else {
            cpu_linear(e, b, VH_PROJ_FC2_W, e->proj_hidden, H1, N, b->vec[VH_PROJ_FC2_B], out, Dl);
        }
    }
}
