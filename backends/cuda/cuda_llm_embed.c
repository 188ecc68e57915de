/*
 * VH_BLOCK_EMBED_LOOKUP on the GPU: each row's token embedding, or its image's patch embedding
 * (per-row metadata in e->llm.rows).
 */
#include "cuda_executor.h"

vh_status cuda_llm_embed(vh_executor *e, const cuda_block *b, const vh_batch *batch, char *err, size_t err_size)
{
    (void)err;
    (void)err_size;
    VHC_MARK(e, "llm.embed", (int)batch->n_rows);
    vhc_embed_rows(e->stream, b->mat[VH_EMBED_LOOKUP_TABLE], e->proj.patch_embeds, e->llm.rows, e->llm.x,
                   (int)batch->n_rows, (int)e->model->llm.hidden);
    return VH_OK;
}

