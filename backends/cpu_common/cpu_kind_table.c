/*
 * The CPU executor's kind table: for each kind of vh_block_variants (block_variants.c, what the
 * core is told), the roles that are linear-layer weights and the function of its file that runs it.
 */
#include "cpu_executor.h"

#define BIT(role) (1ull << (role))

/* In the order of vh_block_variants. Matrices: the roles that are linear-layer weights (position,
 * class and register embeddings are added, the embedding table is looked up). */
const cpu_kind cpu_kinds[VH_N_BLOCK_VARIANTS] = {
    {.matrix_roles = BIT(VH_VIT_EMBED_PATCH_W), .run = cpu_vit_embed},
    {.matrix_roles = BIT(VH_VIT_QKV_W) | BIT(VH_VIT_PROJ_W) | BIT(VH_VIT_FC1_W) | BIT(VH_VIT_FC2_W),
     .run = cpu_vit_block},
    {.matrix_roles = BIT(VH_PROJ_FC1_W) | BIT(VH_PROJ_FC2_W) | BIT(VH_PROJ_FC3_W), .run = cpu_projector},
    {.matrix_roles = 0, .run = cpu_llm_embed},
    {.matrix_roles = BIT(VH_LLM_Q) | BIT(VH_LLM_K) | BIT(VH_LLM_V) | BIT(VH_LLM_O) | BIT(VH_LLM_GATE) |
                     BIT(VH_LLM_UP) | BIT(VH_LLM_DOWN) | BIT(VH_LLM_Q_LORA_A) | BIT(VH_LLM_Q_LORA_B) |
                     BIT(VH_LLM_K_LORA_A) | BIT(VH_LLM_K_LORA_B) | BIT(VH_LLM_V_LORA_A) | BIT(VH_LLM_V_LORA_B) |
                     BIT(VH_LLM_O_LORA_A) | BIT(VH_LLM_O_LORA_B) | BIT(VH_LLM_LORA1_Q_A) | BIT(VH_LLM_LORA1_Q_B) |
                     BIT(VH_LLM_LORA1_K_A) | BIT(VH_LLM_LORA1_K_B) | BIT(VH_LLM_LORA1_V_A) | BIT(VH_LLM_LORA1_V_B) |
                     BIT(VH_LLM_LORA1_O_A) | BIT(VH_LLM_LORA1_O_B),
     .run = cpu_llm_block},
    {.matrix_roles = BIT(VH_LLM_HEAD_LM), .run = cpu_llm_head},
    {.matrix_roles = BIT(VH_PLAN_ENC1_W) | BIT(VH_PLAN_ENC2_W) | BIT(VH_PLAN_ENC3_W) | BIT(VH_PLAN_DIST_W) |
                     BIT(VH_PLAN_GRU0) | BIT(VH_PLAN_GRU0 + 1) | BIT(VH_PLAN_GRU0 + 4) | BIT(VH_PLAN_GRU0 + 5) |
                     BIT(VH_PLAN_GRU0 + 8) | BIT(VH_PLAN_GRU0 + 9) | BIT(VH_PLAN_GRU0 + 12) | BIT(VH_PLAN_GRU0 + 13) |
                     BIT(VH_PLAN_MLP1_W) | BIT(VH_PLAN_MLP2_W) | BIT(VH_PLAN_MLP3_W) | BIT(VH_PLAN_DEC1_W) |
                     BIT(VH_PLAN_DEC2_W) | BIT(VH_PLAN_DEC3_W),
     .run = cpu_planner, .scratch_floats = cpu_planner_scratch_floats},
};
