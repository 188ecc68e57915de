/*
 * An LLM layer's packed weights (cuda_llm_pack.c): the LLM kind's plan_packed and upload_packed.
 */
#ifndef VH_CUDA_LLM_PACK_H
#define VH_CUDA_LLM_PACK_H

#include "cuda_upload.h"

/* Carve q|k|v, gate|up, the stacked biases and the padded LoRA pairs of block b. */
void cuda_llm_pack_plan(vh_executor *e, cuda_block *b, cuda_arena *a);

/* Upload them: the concatenated matrices, then the biases (stacked q | k | v, zeros for one it
 * lacks) and LoRA pairs (A's padding rows zero, B pre-scaled with its padding columns zero). */
vh_status cuda_llm_pack_upload(vh_executor *e, cuda_uploader *u, const cuda_block *b, char *err, size_t err_size);

/* The widest padded LoRA rank of the LLM blocks held, either set, three times a fused q|k|v set's
 * (the width of x A^T; 0: no LoRA). */
uint64_t cuda_llm_pack_max_lora_ld(const vh_executor *e);

#endif
