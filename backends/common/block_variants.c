#include "block_variants.h"

#include <string.h>

const vh_kind_support vh_block_variant_support[VH_N_BLOCK_VARIANTS] = {
    {VH_BLOCK_VIT_EMBED, VH_VIT_EMBED_N_TENSORS, sizeof(vh_vit_params), 0, VH_SLOT_PIXELS, VH_SLOT_TOWER_TOKENS},
    {VH_BLOCK_VIT, VH_VIT_N_TENSORS, sizeof(vh_vit_params), 0, VH_SLOT_TOWER_TOKENS, VH_SLOT_TOWER_TOKENS},
    {VH_BLOCK_PROJECTOR, VH_PROJ_N_TENSORS, sizeof(vh_block_params), 0, VH_SLOT_TOWER_TOKENS, VH_SLOT_PATCH_EMBEDS},
    {VH_BLOCK_LLM_EMBED, VH_LLM_EMBED_N_TENSORS, sizeof(vh_block_params), 0, VH_SLOT_PATCH_EMBEDS, VH_SLOT_ROWS},
    /* Llama and Qwen2 blocks (q/k/v biases), LoRA kept apart in two sets (ABI 2.2) */
    {VH_BLOCK_LLM, VH_LLM_N_TENSORS, sizeof(vh_llm_params), 0, VH_SLOT_ROWS, VH_SLOT_ROWS},
    {VH_BLOCK_LLM_HEAD, VH_LLM_HEAD_N_TENSORS, sizeof(vh_block_params), 0, VH_SLOT_ROWS, VH_SLOT_OUTPUTS},
    {VH_BLOCK_VAE_GRU_PLANNER, VH_PLAN_N_TENSORS, sizeof(vh_planner_params), 0, VH_SLOT_OUTPUTS, VH_SLOT_OUTPUTS},
};

const vh_block_variant vh_block_variants[VH_N_BLOCK_VARIANTS] = {
    {VH_BLOCK_VIT_EMBED, .uses_images = 1, .uses_pixels = 1, .in_tower = 1},
    {VH_BLOCK_VIT, .uses_images = 1, .in_tower = 1, .attends = 1},
    {VH_BLOCK_PROJECTOR, .uses_images = 1, .projects = 1},
    {VH_BLOCK_LLM_EMBED, .uses_rows = 1},
    {VH_BLOCK_LLM, .uses_rows = 1, .llm_layer = 1, .attends = 1, .has_state = 1},
    {VH_BLOCK_LLM_HEAD, .uses_rows = 1, .is_head = 1},
    {VH_BLOCK_VAE_GRU_PLANNER, .uses_rows = 1, .is_planner = 1},
};

int vh_block_variant_index(uint32_t kind)
{
    for (int i = 0; i < VH_N_BLOCK_VARIANTS; i++)
        if (vh_block_variants[i].kind == kind) return i;
    return -1;
}

void vh_block_variant_read_params(const vh_block_variant *v, const vh_block_desc *d, uint32_t *tower,
                                  uint32_t *layer, float *lora_scale, vh_planner_params *plan)
{
    if (v->in_tower) {
        *tower = ((const vh_vit_params *)d->params)->tower;
        *layer = ((const vh_vit_params *)d->params)->layer;
    } else if (v->llm_layer) {
        *layer = ((const vh_llm_params *)d->params)->layer;
        *lora_scale = ((const vh_llm_params *)d->params)->lora_scale;
    } else if (v->is_planner) {
        memcpy(plan, d->params, sizeof *plan);
    }
}
