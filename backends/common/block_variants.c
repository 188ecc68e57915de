#include "block_variants.h"

#include <stdio.h>
#include <string.h>

/* A tower's layer: pre-norm LayerNorm, full attention without positions, GELU MLP, every
 * projection with its bias, q|k|v fused, LayerScale optional. */
static const vh_transformer_support tower_layer = {
    .norm = VH_NORM_LAYER, .placement = VH_NORM_PRE, .attention = VH_ATTN_FULL, .rope = VH_ROPE_NONE,
    .mlp = VH_MLP_GELU, .required = VH_TF_FUSED_QKV | VH_TF_QKV_BIAS | VH_TF_O_BIAS | VH_TF_MLP_BIAS,
    .allowed = VH_TF_FUSED_QKV | VH_TF_QKV_BIAS | VH_TF_O_BIAS | VH_TF_MLP_BIAS | VH_TF_LAYER_SCALE,
    .max_lora_sets = 0};

/* A decoder layer on the rows: pre-norm RMSNorm, causal attention over its KV cache with
 * half-rotation RoPE, SiLU-gated MLP, each of the q/k/v biases optional, LoRA kept apart in up to
 * two sets. */
static const vh_transformer_support decoder_layer = {
    .norm = VH_NORM_RMS, .placement = VH_NORM_PRE, .attention = VH_ATTN_CAUSAL_KV, .rope = VH_ROPE_HALF,
    .mlp = VH_MLP_SILU_GATED, .required = 0, .allowed = VH_TF_QKV_BIAS,
    .max_lora_sets = VH_BLOCK_VARIANT_LORA_SETS};

/* A tower layer with 2-D RoPE (EVA-02's): pre-norm LayerNorm, full attention over the grid or
 * windowed (the grid zero-padded to whole windows after the first norm), interleaved 2-D RoPE on q
 * and k, separate q, k, v (each bias optional), SiLU-gated MLP with its biases and the LayerNorm
 * of its hidden activations. */
#define ROPE_TOWER_LAYER(attn)                                                                          \
    {.norm = VH_NORM_LAYER, .placement = VH_NORM_PRE, .attention = (attn), .rope = VH_ROPE_2D_INTERLEAVED, \
     .mlp = VH_MLP_SILU_GATED, .required = VH_TF_O_BIAS | VH_TF_MLP_BIAS | VH_TF_MLP_SUB_NORM,            \
     .allowed = VH_TF_O_BIAS | VH_TF_MLP_BIAS | VH_TF_MLP_SUB_NORM | VH_TF_QKV_BIAS, .max_lora_sets = 0}
static const vh_transformer_support rope_tower_layer = ROPE_TOWER_LAYER(VH_ATTN_FULL);
static const vh_transformer_support rope_window_layer = ROPE_TOWER_LAYER(VH_ATTN_WINDOWED);

const vh_kind_support vh_block_variant_support[VH_N_BLOCK_VARIANTS] = {
    {VH_BLOCK_PATCH_EMBED, VH_PATCH_EMBED_N_ROLES, sizeof(vh_patch_embed_params), 0, VH_SLOT_KIND_PIXELS,
     VH_SLOT_KIND_TOKENS, NULL},
    {VH_BLOCK_TRANSFORMER, VH_TF_LS2 + 1, sizeof(vh_transformer_params), 0, VH_SLOT_KIND_TOKENS,
     VH_SLOT_KIND_TOKENS, &tower_layer},
    {VH_BLOCK_MLP_CHAIN, VH_CHAIN_N_ROLES, sizeof(vh_chain_params), 0, VH_SLOT_KIND_TOKENS, VH_SLOT_KIND_EMBEDS,
     NULL},
    {VH_BLOCK_EMBED_LOOKUP, VH_EMBED_LOOKUP_N_ROLES, sizeof(vh_block_params), 0, VH_SLOT_KIND_EMBEDS,
     VH_SLOT_KIND_ROWS, NULL},
    {VH_BLOCK_TRANSFORMER, VH_TF_LORA + 8 * VH_BLOCK_VARIANT_LORA_SETS, sizeof(vh_transformer_params), 0,
     VH_SLOT_KIND_ROWS, VH_SLOT_KIND_ROWS, &decoder_layer},
    {VH_BLOCK_READOUT, VH_READOUT_N_ROLES, sizeof(vh_block_params), 0, VH_SLOT_KIND_ROWS, VH_SLOT_KIND_OUTPUTS,
     NULL},
    {VH_BLOCK_VAE_GRU_PLANNER, VH_PLAN_N_TENSORS, sizeof(vh_planner_params), 0, VH_SLOT_KIND_OUTPUTS,
     VH_SLOT_KIND_OUTPUTS, NULL},
    {VH_BLOCK_TRANSFORMER, VH_TF_BASE_ROLES, sizeof(vh_transformer_params), 0, VH_SLOT_KIND_TOKENS,
     VH_SLOT_KIND_TOKENS, &rope_tower_layer},
    {VH_BLOCK_TRANSFORMER, VH_TF_BASE_ROLES, sizeof(vh_transformer_params), 0, VH_SLOT_KIND_TOKENS,
     VH_SLOT_KIND_TOKENS, &rope_window_layer},
};

const vh_block_variant vh_block_variants[VH_N_BLOCK_VARIANTS] = {
    {VH_BLOCK_PATCH_EMBED, .uses_images = 1, .uses_pixels = 1, .in_tower = 1},
    {VH_BLOCK_TRANSFORMER, .uses_images = 1, .in_tower = 1, .attends = 1},
    {VH_BLOCK_MLP_CHAIN, .uses_images = 1, .projects = 1},
    {VH_BLOCK_EMBED_LOOKUP, .uses_rows = 1},
    {VH_BLOCK_TRANSFORMER, .uses_rows = 1, .llm_layer = 1, .attends = 1, .has_state = 1},
    {VH_BLOCK_READOUT, .uses_rows = 1, .is_head = 1},
    {VH_BLOCK_VAE_GRU_PLANNER, .uses_rows = 1, .is_planner = 1},
    {VH_BLOCK_TRANSFORMER, .uses_images = 1, .in_tower = 1, .attends = 1, .rope_2d = 1},
    {VH_BLOCK_TRANSFORMER, .uses_images = 1, .in_tower = 1, .attends = 1, .rope_2d = 1},
};

int vh_block_variant_of(const vh_model_desc *m, const vh_block_desc *d)
{
    for (int i = 0; i < VH_N_BLOCK_VARIANTS; i++) {
        const vh_kind_support *e = &vh_block_variant_support[i];
        int ok = e->kind == d->kind && d->n_inputs >= 1 && vh_block_output_kind(m, d) == e->output_kind;
        for (uint32_t j = 0; ok && j < d->n_inputs; j++) ok = vh_block_input_kind(m, d, j) == e->input_kind;
        if (ok && e->transformer)
            ok = d->params->struct_size >= sizeof(vh_transformer_params) &&
                 !vh_transformer_mismatch(e->transformer, (const vh_transformer_params *)d->params, "", NULL, 0);
        if (ok) return i;
    }
    return -1;
}

void vh_block_variant_read_params(const vh_model_desc *m, const vh_block_desc *d, vh_block_info *info)
{
    memset(info, 0, sizeof *info);
    switch (d->kind) {
    case VH_BLOCK_PATCH_EMBED:
        info->tower = m->slots[d->output].tower;
        info->patch_flags = ((const vh_patch_embed_params *)d->params)->flags;
        break;
    case VH_BLOCK_TRANSFORMER: {
        const vh_transformer_params *p = (const vh_transformer_params *)d->params;
        info->tower = m->slots[d->inputs[0]].tower;
        info->layer = p->layer;
        info->norm_eps = p->norm_eps;
        info->rope_theta = p->rope_theta;
        info->rope_grid = p->rope_grid;
        info->window = p->attention == VH_ATTN_WINDOWED ? p->window : 0;
        info->lora_scale = p->lora_scale;
        break;
    }
    case VH_BLOCK_MLP_CHAIN:
        info->chain_layers = ((const vh_chain_params *)d->params)->n_layers;
        break;
    case VH_BLOCK_VAE_GRU_PLANNER:
        memcpy(&info->plan, d->params, sizeof info->plan);
        break;
    default:
        break;
    }
}

vh_block_variant vh_block_variants_held(const vh_model_desc *m, uint32_t first, uint32_t n)
{
    vh_block_variant any = {0};
    for (uint32_t i = first; i < first + n && i < m->n_blocks; i++) {
        const int k = vh_block_variant_of(m, &m->blocks[i]);
        if (k < 0) continue;
        const vh_block_variant *v = &vh_block_variants[k];
        any.uses_images |= v->uses_images, any.uses_pixels |= v->uses_pixels, any.uses_rows |= v->uses_rows;
        any.in_tower |= v->in_tower, any.projects |= v->projects, any.llm_layer |= v->llm_layer;
        any.attends |= v->attends, any.has_state |= v->has_state, any.is_head |= v->is_head;
        any.is_planner |= v->is_planner, any.rope_2d |= v->rope_2d;
    }
    return any;
}

#define ROLE(r) (1ull << (r))

/* The bias roles of the separate q, k, v projections the flags ask for. */
static uint64_t qkv_bias_roles(uint32_t flags)
{
    uint64_t roles = 0;
    for (uint32_t i = 0; i < 3; i++)
        if (flags & (VH_TF_Q_BIAS << i)) roles |= ROLE(VH_TF_Q_B + i);
    return roles;
}

/* The roles a tower layer or decoder layer of these features reads: those it needs, and those it
 * may have. */
static void feature_roles(const vh_block_variant *v, const vh_transformer_params *p, uint64_t *needs,
                          uint64_t *may)
{
    if (v->rope_2d) {
        *needs = ROLE(VH_TF_ATTN_NORM_W) | ROLE(VH_TF_ATTN_NORM_B) | ROLE(VH_TF_Q_W) | ROLE(VH_TF_K_W) |
                 ROLE(VH_TF_V_W) | ROLE(VH_TF_O_W) | ROLE(VH_TF_O_B) | ROLE(VH_TF_MLP_NORM_W) |
                 ROLE(VH_TF_MLP_NORM_B) | ROLE(VH_TF_GATE_W) | ROLE(VH_TF_GATE_B) | ROLE(VH_TF_UP_W) |
                 ROLE(VH_TF_UP_B) | ROLE(VH_TF_DOWN_W) | ROLE(VH_TF_DOWN_B) | ROLE(VH_TF_SUB_NORM_W) |
                 ROLE(VH_TF_SUB_NORM_B) | qkv_bias_roles(p->flags);
        *may = *needs;
        return;
    }
    if (v->in_tower) {
        *needs = ROLE(VH_TF_ATTN_NORM_W) | ROLE(VH_TF_ATTN_NORM_B) | ROLE(VH_TF_QKV_W) | ROLE(VH_TF_QKV_B) |
                 ROLE(VH_TF_O_W) | ROLE(VH_TF_O_B) | ROLE(VH_TF_MLP_NORM_W) | ROLE(VH_TF_MLP_NORM_B) |
                 ROLE(VH_TF_UP_W) | ROLE(VH_TF_UP_B) | ROLE(VH_TF_DOWN_W) | ROLE(VH_TF_DOWN_B);
        if (p->flags & VH_TF_LAYER_SCALE) *needs |= ROLE(VH_TF_LS1) | ROLE(VH_TF_LS2);
        *may = *needs;
        return;
    }
    *needs = ROLE(VH_TF_ATTN_NORM_W) | ROLE(VH_TF_Q_W) | ROLE(VH_TF_K_W) | ROLE(VH_TF_V_W) | ROLE(VH_TF_O_W) |
             ROLE(VH_TF_MLP_NORM_W) | ROLE(VH_TF_GATE_W) | ROLE(VH_TF_UP_W) | ROLE(VH_TF_DOWN_W) |
             qkv_bias_roles(p->flags);
    *may = *needs;
    for (uint32_t set = 0; set < p->lora_sets && set < VH_BLOCK_VARIANT_LORA_SETS; set++)
        for (uint32_t proj = 0; proj < 4; proj++)
            *may |= ROLE(vh_tf_lora_role(set, proj)) | ROLE(vh_tf_lora_role(set, proj) + 1);
}

int vh_block_variant_tensors_present(const vh_block_variant *v, const vh_block_desc *d, uint32_t index,
                                     const char *backend, char *why, size_t why_size)
{
    if (d->kind != VH_BLOCK_TRANSFORMER) return 1;
    const vh_transformer_params *p = (const vh_transformer_params *)d->params;
    uint64_t needs, may, has = 0;
    feature_roles(v, p, &needs, &may);
    for (uint32_t t = 0; t < d->n_tensors; t++) {
        const uint32_t role = d->tensors[t].role;
        if (!(may & ROLE(role))) {
            snprintf(why, why_size, "%s: block %u (TRANSFORMER, layer %u): tensor '%s' of role %u, which its "
                     "features do not use", backend, index, p->layer, d->tensors[t].name ? d->tensors[t].name : "?",
                     role);
            return 0;
        }
        has |= ROLE(role);
    }
    for (uint32_t role = 0; role < VH_MAX_ROLES; role++)
        if ((needs & ~has) & ROLE(role)) {
            snprintf(why, why_size, "%s: block %u (TRANSFORMER, layer %u) lacks the tensor of role %u its features "
                     "need", backend, index, p->layer, role);
            return 0;
        }
    return 1;
}
