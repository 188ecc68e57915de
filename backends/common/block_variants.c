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

const vh_kind_support vh_block_variant_support[VH_N_BLOCK_VARIANTS] = {
    {VH_BLOCK_PATCH_EMBED, VH_PATCH_EMBED_N_ROLES, sizeof(vh_patch_embed_params), 0, VH_SLOT_KIND_PIXELS,
     VH_SLOT_KIND_TOKENS, NULL},
    {VH_BLOCK_TRANSFORMER, VH_TF_BASE_ROLES, sizeof(vh_transformer_params), 0, VH_SLOT_KIND_TOKENS,
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
};

const vh_block_variant vh_block_variants[VH_N_BLOCK_VARIANTS] = {
    {VH_BLOCK_PATCH_EMBED, .uses_images = 1, .uses_pixels = 1, .in_tower = 1},
    {VH_BLOCK_TRANSFORMER, .uses_images = 1, .in_tower = 1, .attends = 1},
    {VH_BLOCK_MLP_CHAIN, .uses_images = 1, .projects = 1},
    {VH_BLOCK_EMBED_LOOKUP, .uses_rows = 1},
    {VH_BLOCK_TRANSFORMER, .uses_rows = 1, .llm_layer = 1, .attends = 1, .has_state = 1},
    {VH_BLOCK_READOUT, .uses_rows = 1, .is_head = 1},
    {VH_BLOCK_VAE_GRU_PLANNER, .uses_rows = 1, .is_planner = 1},
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
        any.is_planner |= v->is_planner;
    }
    return any;
}

int vh_block_variant_tensors_present(const vh_block_variant *v, const vh_block_desc *d, uint32_t index,
                                     const char *backend, char *why, size_t why_size)
{
    static const uint32_t tower_roles[] = {VH_TF_ATTN_NORM_W, VH_TF_ATTN_NORM_B, VH_TF_QKV_W, VH_TF_QKV_B,
                                           VH_TF_O_W, VH_TF_O_B, VH_TF_MLP_NORM_W, VH_TF_MLP_NORM_B,
                                           VH_TF_UP_W, VH_TF_UP_B, VH_TF_DOWN_W, VH_TF_DOWN_B};
    static const uint32_t decoder_roles[] = {VH_TF_ATTN_NORM_W, VH_TF_Q_W, VH_TF_K_W, VH_TF_V_W, VH_TF_O_W,
                                             VH_TF_MLP_NORM_W, VH_TF_GATE_W, VH_TF_UP_W, VH_TF_DOWN_W};
    if (d->kind != VH_BLOCK_TRANSFORMER) return 1;
    const vh_transformer_params *p = (const vh_transformer_params *)d->params;
    const uint32_t *roles = v->in_tower ? tower_roles : decoder_roles;
    const uint32_t n = v->in_tower ? sizeof tower_roles / sizeof *tower_roles
                                   : sizeof decoder_roles / sizeof *decoder_roles;
    for (uint32_t i = 0; i <= n; i++) {
        /* one more: a tower layer's LayerScale pair when its flag says so */
        const uint32_t role = i < n ? roles[i] : VH_TF_LS1;
        if (i == n && !(v->in_tower && (p->flags & VH_TF_LAYER_SCALE))) break;
        if (!vh_block_tensor(d, role) || (i == n && !vh_block_tensor(d, VH_TF_LS2))) {
            snprintf(why, why_size, "%s: block %u (TRANSFORMER, layer %u) lacks the tensor of role %u its "
                     "features need", backend, index, p->layer, i == n && vh_block_tensor(d, role) ? VH_TF_LS2 : role);
            return 0;
        }
    }
    for (uint32_t i = 0; !v->in_tower && i < 3; i++)
        if ((p->flags & (VH_TF_Q_BIAS << i)) && !vh_block_tensor(d, VH_TF_Q_B + i)) {
            snprintf(why, why_size, "%s: block %u (TRANSFORMER, layer %u) has the flag '%s' without its tensor",
                     backend, index, p->layer, vh_tf_flag_name(1 + i));
            return 0;
        }
    return 1;
}
