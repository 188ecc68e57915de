/*
 * The block kinds the cuda executor runs: what it tells the core (vh_kind_support: roles,
 * parameters, options, wiring) and, for each, the function that enqueues it (a file per kind).
 */
#include "cuda_executor.h"

const vh_kind_support cuda_kind_support[CUDA_N_KINDS] = {
    {VH_BLOCK_VIT_EMBED, VH_VIT_EMBED_N_TENSORS, sizeof(vh_vit_params), 0, VH_SLOT_PIXELS, VH_SLOT_TOWER_TOKENS},
    {VH_BLOCK_VIT, VH_VIT_N_TENSORS, sizeof(vh_vit_params), 0, VH_SLOT_TOWER_TOKENS, VH_SLOT_TOWER_TOKENS},
    {VH_BLOCK_PROJECTOR, VH_PROJ_N_TENSORS, sizeof(vh_block_params), 0, VH_SLOT_TOWER_TOKENS, VH_SLOT_PATCH_EMBEDS},
    {VH_BLOCK_LLM_EMBED, VH_LLM_EMBED_N_TENSORS, sizeof(vh_block_params), 0, VH_SLOT_PATCH_EMBEDS, VH_SLOT_ROWS},
    /* Llama and Qwen2 blocks (q/k/v biases), LoRA kept apart in two sets (ABI 2.2) */
    {VH_BLOCK_LLM, VH_LLM_N_TENSORS, sizeof(vh_llm_params), 0, VH_SLOT_ROWS, VH_SLOT_ROWS},
    {VH_BLOCK_LLM_HEAD, VH_LLM_HEAD_N_TENSORS, sizeof(vh_block_params), 0, VH_SLOT_ROWS, VH_SLOT_OUTPUTS},
    {VH_BLOCK_VAE_GRU_PLANNER, VH_PLAN_N_TENSORS, sizeof(vh_planner_params), 0, VH_SLOT_OUTPUTS, VH_SLOT_OUTPUTS},
};

/* In the order of cuda_kind_support. */
const cuda_kind cuda_kinds[CUDA_N_KINDS] = {
    {.uses_images = 1, .uses_pixels = 1, .run = cuda_vit_embed},
    {.uses_images = 1, .run = cuda_vit_block},
    {.uses_images = 1, .run = cuda_projector},
    {.uses_rows = 1, .run = cuda_llm_embed},
    {.uses_rows = 1, .has_state = 1, .run = cuda_llm_block},
    {.uses_rows = 1, .is_head = 1, .run = cuda_llm_head},
    {.uses_rows = 1, .is_planner = 1, .run = cuda_planner},
};

const cuda_kind *cuda_kind_of(uint32_t kind)
{
    for (uint32_t i = 0; i < CUDA_N_KINDS; i++)
        if (cuda_kind_support[i].kind == kind) return &cuda_kinds[i];
    return NULL;
}
