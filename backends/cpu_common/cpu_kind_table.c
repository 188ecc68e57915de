/*
 * The CPU executor's kind table: for each kind of vh_block_variants (block_variants.c, what the
 * core is told), the roles that are linear-layer weights and the function of its file that runs it.
 */
#include "cpu_executor.h"

#define BIT(role) (1ull << (role))
/* roles first .. last */
#define ROLES(first, last) ((BIT(last) << 1) - BIT(first))

/* In the order of vh_block_variants. Matrices: the roles that are linear-layer weights (position,
 * class and register embeddings are added, the embedding table is looked up). */
const cpu_kind cpu_kinds[VH_N_BLOCK_VARIANTS] = {
    {.matrix_roles = BIT(VH_PATCH_EMBED_W), .run = cpu_vit_embed},
    {.matrix_roles = BIT(VH_TF_QKV_W) | BIT(VH_TF_O_W) | BIT(VH_TF_UP_W) | BIT(VH_TF_DOWN_W),
     .run = cpu_vit_block},
    {.matrix_roles = BIT(VH_CHAIN_FC1_W) | BIT(VH_CHAIN_FC2_W) | BIT(VH_CHAIN_FC3_W), .run = cpu_projector},
    {.matrix_roles = 0, .run = cpu_llm_embed},
    {.matrix_roles = BIT(VH_TF_Q_W) | BIT(VH_TF_K_W) | BIT(VH_TF_V_W) | BIT(VH_TF_O_W) | BIT(VH_TF_GATE_W) |
                     BIT(VH_TF_UP_W) | BIT(VH_TF_DOWN_W) | ROLES(VH_TF_LORA, VH_TF_LORA_ROLE(VH_BLOCK_VARIANT_LORA_SETS - 1, 3) + 1),
     .run = cpu_llm_block},
    {.matrix_roles = BIT(VH_READOUT_VOCAB), .run = cpu_llm_head},
    {.matrix_roles = BIT(VH_PLAN_ENC1_W) | BIT(VH_PLAN_ENC2_W) | BIT(VH_PLAN_ENC3_W) | BIT(VH_PLAN_DIST_W) |
                     BIT(VH_PLAN_GRU0) | BIT(VH_PLAN_GRU0 + 1) | BIT(VH_PLAN_GRU0 + 4) | BIT(VH_PLAN_GRU0 + 5) |
                     BIT(VH_PLAN_GRU0 + 8) | BIT(VH_PLAN_GRU0 + 9) | BIT(VH_PLAN_GRU0 + 12) | BIT(VH_PLAN_GRU0 + 13) |
                     BIT(VH_PLAN_MLP1_W) | BIT(VH_PLAN_MLP2_W) | BIT(VH_PLAN_MLP3_W) | BIT(VH_PLAN_DEC1_W) |
                     BIT(VH_PLAN_DEC2_W) | BIT(VH_PLAN_DEC3_W),
     .run = cpu_planner, .scratch_floats = cpu_planner_scratch_floats},
    /* the tower layers with 2-D RoPE, full and windowed: one file */
    {.matrix_roles = BIT(VH_TF_Q_W) | BIT(VH_TF_K_W) | BIT(VH_TF_V_W) | BIT(VH_TF_O_W) | BIT(VH_TF_GATE_W) |
                     BIT(VH_TF_UP_W) | BIT(VH_TF_DOWN_W),
     .run = cpu_rope_tower_layer, .scratch_floats = cpu_rope_tower_layer_scratch_floats},
    {.matrix_roles = BIT(VH_TF_Q_W) | BIT(VH_TF_K_W) | BIT(VH_TF_V_W) | BIT(VH_TF_O_W) | BIT(VH_TF_GATE_W) |
                     BIT(VH_TF_UP_W) | BIT(VH_TF_DOWN_W),
     .run = cpu_rope_tower_layer, .scratch_floats = cpu_rope_tower_layer_scratch_floats},
    /* on query sets: the chain (from query sets, or gathering a frame's image tokens), the
     * modulated norm, the decoder layers (self- and cross-attention: one file) */
    {.matrix_roles = BIT(VH_CHAIN_FC1_W) | BIT(VH_CHAIN_FC2_W) | BIT(VH_CHAIN_FC3_W), .run = cpu_query_chain,
     .scratch_floats = cpu_query_chain_scratch_floats},
    {.matrix_roles = BIT(VH_CHAIN_FC1_W) | BIT(VH_CHAIN_FC2_W) | BIT(VH_CHAIN_FC3_W), .run = cpu_query_chain,
     .scratch_floats = cpu_query_chain_scratch_floats},
    {.matrix_roles = BIT(VH_MLN_REDUCE_W) | BIT(VH_MLN_GAMMA_W) | BIT(VH_MLN_BETA_W), .run = cpu_modulated_norm,
     .scratch_floats = cpu_modulated_norm_scratch_floats},
    {.matrix_roles = BIT(VH_TF_Q_W) | BIT(VH_TF_K_W) | BIT(VH_TF_V_W) | BIT(VH_TF_O_W) | BIT(VH_TF_UP_W) |
                     BIT(VH_TF_DOWN_W),
     .run = cpu_query_layer, .scratch_floats = cpu_query_layer_scratch_floats},
    {.matrix_roles = BIT(VH_TF_Q_W) | BIT(VH_TF_K_W) | BIT(VH_TF_V_W) | BIT(VH_TF_O_W) | BIT(VH_TF_UP_W) |
                     BIT(VH_TF_DOWN_W),
     .run = cpu_query_layer, .scratch_floats = cpu_query_layer_scratch_floats},
};
