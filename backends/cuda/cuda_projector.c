/*
 * VH_BLOCK_MLP_CHAIN on the GPU: Prismatic's MLP projector from the towers' patch tokens to the
 * LLM's patch embeddings.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cuda_executor.h"

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
            vhc_gather_patches_bf16(e->stream, cuda_tower_tokens(e, t, i), (int)v->n_prefix, N, (int)v->embed_dim,
                                    p->in + (size_t)i * N * Dv, col, Dv);
            col += (int)v->embed_dim;
        }
    }
    float *out = p->patch_embeds;
    VHC_MARK(e, "projector gemms", R);
    if ((st = vhc_linear(e->gemm, p->in, Dv, R, Dv, b->mat[VH_CHAIN_FC1_W], H1, p->h1, H1, 0, err, err_size)))
        return st;
    vhc_bias_gelu_bf16(e->stream, p->h1, b->vec[VH_CHAIN_FC1_B], p->h1_bf16, R, H1);
    if (b->info.chain_layers == 3) {
        if ((st = vhc_linear(e->gemm, p->h1_bf16, H1, R, H1, b->mat[VH_CHAIN_FC2_W], Dl, p->h2, Dl, 0, err, err_size)))
            return st;
        vhc_bias_gelu_bf16(e->stream, p->h2, b->vec[VH_CHAIN_FC2_B], p->h2_bf16, R, Dl);
        if ((st = vhc_linear(e->gemm, p->h2_bf16, Dl, R, Dl, b->mat[VH_CHAIN_FC3_W], Dl, out, Dl, 0, err, err_size)))
            return st;
        vhc_bias_add_f32(e->stream, out, b->vec[VH_CHAIN_FC3_B], out, R, Dl);
    } else {
        if ((st = vhc_linear(e->gemm, p->h1_bf16, H1, R, H1, b->mat[VH_CHAIN_FC2_W], Dl, out, Dl, 0, err, err_size)))
            return st;
        vhc_bias_add_f32(e->stream, out, b->vec[VH_CHAIN_FC2_B], out, R, Dl);
    }
    return VH_OK;
}
