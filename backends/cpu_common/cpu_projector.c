/*
 * VH_BLOCK_MLP_CHAIN on the CPU: Prismatic's MLP projector from the towers' patch tokens to the
 * LLM's patch embeddings.
 */
#include <string.h>

#include "cpu_executor.h"

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
            const float *patches = cpu_tower_tokens(e, t, i) + (int64_t)v->n_prefix * v->embed_dim;
            for (int64_t r = 0; r < N; r++)
                memcpy(e->proj_in + r * Dv + col, patches + r * v->embed_dim, sizeof(float) * v->embed_dim);
            col += v->embed_dim;
        }
        float *out = e->patch_embeds + (size_t)i * N * Dl;
        cpu_linear(e, b, VH_CHAIN_FC1_W, e->proj_in, Dv, N, b->vec[VH_CHAIN_FC1_B], e->proj_hidden, H1);
        vhk_gelu_exact(e->pool, e->proj_hidden, N * H1);
        if (b->info.chain_layers == 3) {
            cpu_linear(e, b, VH_CHAIN_FC2_W, e->proj_hidden, H1, N, b->vec[VH_CHAIN_FC2_B], e->proj_out, Dl);
            vhk_gelu_exact(e->pool, e->proj_out, N * Dl);
            cpu_linear(e, b, VH_CHAIN_FC3_W, e->proj_out, Dl, N, b->vec[VH_CHAIN_FC3_B], out, Dl);
        } else {
            cpu_linear(e, b, VH_CHAIN_FC2_W, e->proj_hidden, H1, N, b->vec[VH_CHAIN_FC2_B], out, Dl);
        }
    }
}
