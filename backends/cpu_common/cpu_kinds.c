/*
 * The block kinds the CPU executor runs: what it tells the core (vh_kind_support: roles,
 * parameters, options, wiring) and, for each, the function that runs it (a file per kind).
 */
#include "cpu_executor.h"

#define BIT(role) (1ull << (role))

const vh_kind_support cpu_kind_support[CPU_N_KINDS] = {
    {VH_BLOCK_VIT_EMBED, VH_VIT_EMBED_N_TENSORS, sizeof(vh_vit_params), 0, VH_SLOT_PIXELS, VH_SLOT_TOWER_TOKENS},
    {VH_BLOCK_VIT, VH_VIT_N_TENSORS, sizeof(vh_vit_params), 0, VH_SLOT_TOWER_TOKENS, VH_SLOT_TOWER_TOKENS},
    {VH_BLOCK_PROJECTOR, VH_PROJ_N_TENSORS, sizeof(vh_block_params), 0, VH_SLOT_TOWER_TOKENS, VH_SLOT_PATCH_EMBEDS},
    {VH_BLOCK_LLM_EMBED, VH_LLM_EMBED_N_TENSORS, sizeof(vh_block_params), 0, VH_SLOT_PATCH_EMBEDS, VH_SLOT_ROWS},
    {VH_BLOCK_LLM, VH_LLM_N_TENSORS, sizeof(vh_llm_params), 0, VH_SLOT_ROWS, VH_SLOT_ROWS},
    {VH_BLOCK_LLM_HEAD, VH_LLM_HEAD_N_TENSORS, sizeof(vh_block_params), 0, VH_SLOT_ROWS, VH_SLOT_OUTPUTS},
    {VH_BLOCK_VAE_GRU_PLANNER, VH_PLAN_N_TENSORS, sizeof(vh_planner_params), 0, VH_SLOT_OUTPUTS, VH_SLOT_OUTPUTS},
};

/* In the order of cpu_kind_support. Matrices: the roles that are linear-layer weights (position,
 * class and register embeddings are added, the embedding table is looked up). */
const cpu_kind cpu_kinds[CPU_N_KINDS] = {
    {.matrix_roles = BIT(VH_VIT_EMBED_PATCH_W), .uses_images = 1, .run = cpu_vit_embed},
    {.matrix_roles = BIT(VH_VIT_QKV_W) | BIT(VH_VIT_PROJ_W) | BIT(VH_VIT_FC1_W) | BIT(VH_VIT_FC2_W),
     .uses_images = 1, .run = cpu_vit_block},
    {.matrix_roles = BIT(VH_PROJ_FC1_W) | BIT(VH_PROJ_FC2_W) | BIT(VH_PROJ_FC3_W), .uses_images = 1,
     .run = cpu_projector},
    {.matrix_roles = 0, .uses_rows = 1, .run = cpu_llm_embed},
    {.matrix_roles = BIT(VH_LLM_Q) | BIT(VH_LLM_K) | BIT(VH_LLM_V) | BIT(VH_LLM_O) | BIT(VH_LLM_GATE) |
                     BIT(VH_LLM_UP) | BIT(VH_LLM_DOWN) | BIT(VH_LLM_Q_LORA_A) | BIT(VH_LLM_Q_LORA_B) |
                     BIT(VH_LLM_K_LORA_A) | BIT(VH_LLM_K_LORA_B) | BIT(VH_LLM_V_LORA_A) | BIT(VH_LLM_V_LORA_B) |
                     BIT(VH_LLM_O_LORA_A) | BIT(VH_LLM_O_LORA_B) | BIT(VH_LLM_LORA1_Q_A) | BIT(VH_LLM_LORA1_Q_B) |
                     BIT(VH_LLM_LORA1_K_A) | BIT(VH_LLM_LORA1_K_B) | BIT(VH_LLM_LORA1_V_A) | BIT(VH_LLM_LORA1_V_B) |
                     BIT(VH_LLM_LORA1_O_A) | BIT(VH_LLM_LORA1_O_B),
     .uses_rows = 1, .has_state = 1, .run = cpu_llm_block},
    {.matrix_roles = BIT(VH_LLM_HEAD_LM), .uses_rows = 1, .is_head = 1, .run = cpu_llm_head},
    {.matrix_roles = BIT(VH_PLAN_ENC1_W) | BIT(VH_PLAN_ENC2_W) | BIT(VH_PLAN_ENC3_W) | BIT(VH_PLAN_DIST_W) |
                     BIT(VH_PLAN_GRU0) | BIT(VH_PLAN_GRU0 + 1) | BIT(VH_PLAN_GRU0 + 4) | BIT(VH_PLAN_GRU0 + 5) |
                     BIT(VH_PLAN_GRU0 + 8) | BIT(VH_PLAN_GRU0 + 9) | BIT(VH_PLAN_GRU0 + 12) | BIT(VH_PLAN_GRU0 + 13) |
                     BIT(VH_PLAN_MLP1_W) | BIT(VH_PLAN_MLP2_W) | BIT(VH_PLAN_MLP3_W) | BIT(VH_PLAN_DEC1_W) |
                     BIT(VH_PLAN_DEC2_W) | BIT(VH_PLAN_DEC3_W),
     .uses_rows = 1, .is_planner = 1, .run = cpu_planner, .scratch_floats = cpu_planner_scratch_floats},
};

const cpu_kind *cpu_kind_of(uint32_t kind)
{
    for (uint32_t i = 0; i < CPU_N_KINDS; i++)
        if (cpu_kind_support[i].kind == kind) return &cpu_kinds[i];
    return NULL;
}
