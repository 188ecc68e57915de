/*
 * The cuda executor's kind table: for each kind of vh_block_variants (block_variants.c, what the
 * core is told), the roles it holds its own way and the functions of its files that lay them out
 * and enqueue it.
 */
#include "cuda_executor.h"
#include "cuda_llm_pack.h"
#include "cuda_rope_tower_pack.h"

#define BIT(role) (1ull << (role))
/* roles first .. last */
#define ROLES(first, last) ((BIT(last) << 1) - BIT(first))

/* In the order of vh_block_variants. */
const cuda_kind cuda_kinds[VH_N_BLOCK_VARIANTS] = {
    /* position / class / register embeddings are added, never multiplied: kept fp32 */
    {.fp32_roles = ~BIT(VH_PATCH_EMBED_W), .patch_roles = BIT(VH_PATCH_EMBED_W), .run = cuda_vit_embed},
    {.run = cuda_vit_block},
    {.run = cuda_projector},
    {.run = cuda_llm_embed},
    /* q/k/v and gate/up concatenated, the q/k/v biases stacked into one vector, the LoRA pairs padded */
    {.packed_roles = BIT(VH_TF_Q_W) | BIT(VH_TF_K_W) | BIT(VH_TF_V_W) | BIT(VH_TF_GATE_W) | BIT(VH_TF_UP_W) |
                     BIT(VH_TF_Q_B) | BIT(VH_TF_K_B) | BIT(VH_TF_V_B) |
                     ROLES(VH_TF_LORA, VH_TF_LORA_ROLE(VH_BLOCK_VARIANT_LORA_SETS - 1, 3) + 1),
     .plan_packed = cuda_llm_pack_plan, .upload_packed = cuda_llm_pack_upload, .run = cuda_llm_block},
    {.run = cuda_llm_head},
    {.run = cuda_planner},
    /* the tower layers with 2-D RoPE, global and windowed: q|k|v one matrix, gate|up and down padded
     * to a hidden width of a multiple of 8 (cuda_rope_tower_pack.c) */
    {.packed_roles = BIT(VH_TF_Q_W) | BIT(VH_TF_K_W) | BIT(VH_TF_V_W) | BIT(VH_TF_GATE_W) | BIT(VH_TF_UP_W) |
                     BIT(VH_TF_DOWN_W),
     .plan_packed = cuda_rope_tower_pack_plan, .upload_packed = cuda_rope_tower_pack_upload,
     .run = cuda_rope_tower_layer, .check = cuda_rope_tower_layer_check},
    {.packed_roles = BIT(VH_TF_Q_W) | BIT(VH_TF_K_W) | BIT(VH_TF_V_W) | BIT(VH_TF_GATE_W) | BIT(VH_TF_UP_W) |
                     BIT(VH_TF_DOWN_W),
     .plan_packed = cuda_rope_tower_pack_plan, .upload_packed = cuda_rope_tower_pack_upload,
     .run = cuda_rope_tower_layer, .check = cuda_rope_tower_layer_check},
    /* on query sets: the chains (one over query sets, one gathering a frame's image tokens), MLN,
     * the decoder's self- and cross-attention layers */
    {.run = cuda_query_chain, .scratch_bytes = cuda_query_chain_scratch_bytes, .check = cuda_query_chain_check},
    {.run = cuda_query_chain, .scratch_bytes = cuda_query_chain_scratch_bytes, .check = cuda_query_chain_check},
    {.run = cuda_modulated_norm, .scratch_bytes = cuda_modulated_norm_scratch_bytes},
    {.run = cuda_query_layer, .scratch_bytes = cuda_query_layer_scratch_bytes, .check = cuda_query_layer_check},
    {.run = cuda_query_layer, .scratch_bytes = cuda_query_layer_scratch_bytes, .check = cuda_query_layer_check},
};

vh_kind_support cuda_support[VH_N_BLOCK_VARIANTS];
uint32_t cuda_n_support;

void cuda_kinds_init(void)
{
    cuda_n_support = 0;
    for (uint32_t i = 0; i < VH_N_BLOCK_VARIANTS; i++)
        if (cuda_kinds[i].run) cuda_support[cuda_n_support++] = vh_block_variant_support[i];
}
