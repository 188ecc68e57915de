/*
 * The cuda executor's kind table: for each kind of vh_block_variants (block_variants.c, what the
 * core is told), the roles it holds its own way and the functions of its files that lay them out
 * and enqueue it.
 */
#include "cuda_executor.h"
#include "cuda_llm_pack.h"

#define BIT(role) (1ull << (role))
/* roles first .. last */
#define ROLES(first, last) ((BIT(last) << 1) - BIT(first))

/* In the order of vh_block_variants. */
const cuda_kind cuda_kinds[VH_N_BLOCK_VARIANTS] = {
    /* position / class / register embeddings are added, never multiplied: kept fp32 */
    {.fp32_roles = ~BIT(VH_VIT_EMBED_PATCH_W), .patch_roles = BIT(VH_VIT_EMBED_PATCH_W), .run = cuda_vit_embed},
    {.run = cuda_vit_block},
    {.run = cuda_projector},
    {.run = cuda_llm_embed},
    /* q/k/v and gate/up concatenated, the q/k/v biases stacked into one vector, the LoRA pairs padded */
    {.packed_roles = BIT(VH_LLM_Q) | BIT(VH_LLM_K) | BIT(VH_LLM_V) | BIT(VH_LLM_GATE) | BIT(VH_LLM_UP) |
                     BIT(VH_LLM_Q_BIAS) | BIT(VH_LLM_K_BIAS) | BIT(VH_LLM_V_BIAS) |
                     ROLES(VH_LLM_Q_LORA_A, VH_LLM_O_LORA_B) | ROLES(VH_LLM_LORA1_Q_A, VH_LLM_LORA1_O_B),
     .plan_packed = cuda_llm_pack_plan, .upload_packed = cuda_llm_pack_upload, .run = cuda_llm_block},
    {.run = cuda_llm_head},
    {.run = cuda_planner},
};
