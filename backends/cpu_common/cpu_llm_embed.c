/*
 * VH_BLOCK_EMBED_LOOKUP on the CPU: each row's token embedding, or for VH_TOKEN_IMAGE rows the next
 * patch embedding of the segment's image (or the next row of the segment's own embeddings,
 * VH_BATCH_SEGMENT_EMBEDS: precomputed vision tokens).
 */
#include <string.h>

#include "cpu_executor.h"

void cpu_llm_embed(vh_executor *e, const cpu_block *b, const vh_batch *batch)
{
    const int64_t Dl = e->model->llm.hidden, N = e->model->n_image_tokens;
    uint32_t row = 0;
    for (uint32_t s = 0; s < batch->n_segments; s++) {
        const vh_segment *seg = &batch->segments[s];
        const float *patches = (batch->options & VH_BATCH_SEGMENT_EMBEDS) && seg->embeds ? seg->embeds
                               : seg->image >= 0 ? e->patch_embeds + (size_t)seg->image * N * Dl : NULL;
        uint32_t next_patch = 0;
        for (uint32_t r = 0; r < seg->n_rows; r++, row++) {
            float *x = e->llm.x + (size_t)row * Dl;
            int32_t tok = batch->tokens[row];
            if (tok == VH_TOKEN_IMAGE)
                memcpy(x, patches + (size_t)next_patch++ * Dl, sizeof(float) * Dl);
            else
                vhk_embed_rows(&b->t[VH_EMBED_LOOKUP_TABLE], &tok, 1, x);
        }
    }
}

