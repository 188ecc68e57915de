/*
 * VH_BLOCK_PATCH_EMBED on the GPU: a timm ViT's patch embedding (im2col + GEMM), then [cls, reg...,
 * patches] with position embeddings, for each image of the batch.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cuda_executor.h"

/* patch_embed (im2col + GEMM), then [cls, reg..., patches] with position embeddings. */
vh_status cuda_vit_embed(vh_executor *e, const cuda_block *b, const vh_batch *batch, char *err, size_t err_size)
{
    const uint32_t t = b->info.tower;
    const vh_vit_desc *v = &e->model->towers[t];
    const int D = (int)v->embed_dim, P = (int)v->patch_size, S = (int)v->image_size, NP = (int)v->n_patches;
    const int K = VHC_PATCH_LD(P); /* the weight's rows are padded alike at upload */
    vit_scratch *s = &e->vit.scratch;
    for (uint32_t i = 0; i < batch->n_images; i++) {
        const float *pixels = e->vit.pixels + i * e->vit.pixel_floats + e->vit.tower_pixels[t]; /* uploaded */
        VHC_MARK(e, "vit.embed im2col", NP);
        vhc_im2col_bf16(e->stream, pixels, S, P, s->patches, K);
        VHC_MARK(e, "vit.embed gemm", NP);
        vh_status st = vhc_linear(e->gemm, s->patches, K, NP, K, b->mat[VH_PATCH_EMBED_W], D, s->tmp, D, 0,
                                  err, err_size);
        if (st) return st;
        const int pos_covers_prefix = (b->info.patch_flags & VH_PATCH_POS_PREFIX) ? 1 : 0;
        VHC_MARK(e, "vit.embed assemble", NP);
        vhc_vit_assemble(e->stream, s->tmp, b->vec[VH_PATCH_EMBED_B], b->vec[VH_PATCH_EMBED_CLS],
                         b->vec[VH_PATCH_EMBED_REG], (int)v->n_registers, b->vec[VH_PATCH_EMBED_POS], pos_covers_prefix,
                         cuda_tower_tokens(e, t, i), NP, D);
    }
    return VH_OK;
}

