/*
 * VH_BLOCK_PATCH_EMBED on the CPU: a timm ViT's patch embedding, class/register tokens and position
 * embeddings, for each image of the batch.
 */
#include <math.h>
#include <string.h>

#include "cpu_executor.h"

/* patch_embed (a P x P stride-P convolution, as im2col + GEMM), then class/register tokens and
 * position embeddings in timm's order: [cls, reg..., patches]. */
void cpu_vit_embed(vh_executor *e, const cpu_block *b, const vh_batch *batch)
{
    const uint32_t t = b->info.tower;
    const vh_vit_desc *v = &e->model->towers[t];
    const int64_t D = v->embed_dim, P = v->patch_size, NP = v->n_patches, R = v->n_registers;
    const int64_t prefix = v->n_prefix;
    float *pos = NULL; /* fp32 position embeddings, converted per call (small: L x D) */

    for (uint32_t i = 0; i < batch->n_images; i++) {
        float *x = cpu_tower_tokens(e, t, i);
        const float *pixels = batch->pixels[(size_t)i * e->model->n_towers + t];
        vhk_im2col_patches(pixels, v->image_size, P, e->vit.patches);
        cpu_linear(e, b, VH_PATCH_EMBED_W, e->vit.patches, 3 * P * P, NP, b->vec[VH_PATCH_EMBED_B], x + prefix * D, D);
        if (v->has_class_token)
            vhk_convert_to_f32(b->t[VH_PATCH_EMBED_CLS].data, b->t[VH_PATCH_EMBED_CLS].dtype, x, D);
        if (R) vhk_convert_to_f32(b->t[VH_PATCH_EMBED_REG].data, b->t[VH_PATCH_EMBED_REG].dtype,
                                  x + (int64_t)v->has_class_token * D, R * D);
        /* pos_embed covers the patches only (DINOv2: add, then prepend), or every token (add after
         * the concatenation). Either way it lines up with the tail of the token array. */
        const vh_tensor_view *pe = &b->t[VH_PATCH_EMBED_POS];
        const int64_t L = pe->shape[1];
        float *dst = x + (prefix + NP - L) * D;
        pos = e->vit.proj; /* scratch of at least T x D floats */
        vhk_convert_to_f32(pe->data, pe->dtype, pos, L * D);
        vhk_add(e->pool, dst, pos, L * D);
    }
}

