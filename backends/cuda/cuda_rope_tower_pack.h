/*
 * A tower layer with 2-D RoPE's packed weights (cuda_rope_tower_pack.c): q|k|v, gate|up padded to
 * Fp rows each, down padded to Fp columns. The kind's plan_packed and upload_packed.
 */
#ifndef VH_CUDA_ROPE_TOWER_PACK_H
#define VH_CUDA_ROPE_TOWER_PACK_H

#include "cuda_upload.h"

/* The MLP's hidden width F rounded up to 8: the padded GEMMs' and the sub-norm output's width. */
int64_t cuda_rope_tower_padded_mlp(int64_t F);

void cuda_rope_tower_pack_plan(vh_executor *e, cuda_block *b, cuda_arena *a);
vh_status cuda_rope_tower_pack_upload(vh_executor *e, cuda_uploader *u, const cuda_block *b, char *err,
                                      size_t err_size);

#endif
