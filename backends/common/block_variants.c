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

/* The layers of a DETR-style decoder on query sets (PETR's, StreamPETR's): post-norm LayerNorm, no
 * RoPE; self-attention over the rows and, optionally, extra key rows with a prefix mask, no MLP;
 * cross-attention to a key set followed by a ReLU MLP. Positions added to queries and keys, biases
 * per projection (the released code passes dropout as FlashMHA's bias). */
static const vh_transformer_support query_self_layer = {
    .norm = VH_NORM_LAYER, .placement = VH_NORM_POST, .attention = VH_ATTN_FULL, .rope = VH_ROPE_NONE,
    .mlp = VH_MLP_NONE, .required = 0,
    .allowed = VH_TF_QKV_BIAS | VH_TF_O_BIAS | VH_TF_QK_POS | VH_TF_ATTN_MASK | VH_TF_EXTRA_KEYS,
    .max_lora_sets = 0};
static const vh_transformer_support query_cross_layer = {
    .norm = VH_NORM_LAYER, .placement = VH_NORM_POST, .attention = VH_ATTN_CROSS, .rope = VH_ROPE_NONE,
    .mlp = VH_MLP_RELU, .required = 0, .allowed = VH_TF_QKV_BIAS | VH_TF_O_BIAS | VH_TF_MLP_BIAS | VH_TF_QK_POS,
    .max_lora_sets = 0};

const vh_kind_support vh_block_variant_support[VH_N_BLOCK_VARIANTS] = {
    {VH_BLOCK_PATCH_EMBED, VH_PATCH_EMBED_N_ROLES, sizeof(vh_patch_embed_params), 0, VH_SLOT_KIND_PIXELS,
     VH_SLOT_KIND_TOKENS, NULL},
    {VH_BLOCK_TRANSFORMER, VH_TF_LS2 + 1, sizeof(vh_transformer_params), 0, VH_SLOT_KIND_TOKENS,
     VH_SLOT_KIND_TOKENS, &tower_layer},
    {VH_BLOCK_MLP_CHAIN, VH_CHAIN_FC3_B + 1, sizeof(vh_chain_params), 0, VH_SLOT_KIND_TOKENS,
     VH_SLOT_KIND_EMBEDS, NULL},
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
    {VH_BLOCK_MLP_CHAIN, VH_CHAIN_N_ROLES, sizeof(vh_chain_params), 0, VH_SLOT_KIND_QUERIES, VH_SLOT_KIND_QUERIES,
     NULL},
    {VH_BLOCK_MLP_CHAIN, VH_CHAIN_N_ROLES, sizeof(vh_chain_params), 0, VH_SLOT_KIND_TOKENS, VH_SLOT_KIND_QUERIES,
     NULL},
    {VH_BLOCK_MODULATED_NORM, VH_MLN_N_ROLES, sizeof(vh_mln_params), 0, VH_SLOT_KIND_QUERIES, VH_SLOT_KIND_QUERIES,
     NULL},
    {VH_BLOCK_TRANSFORMER, VH_TF_BASE_ROLES, sizeof(vh_transformer_params), 0, VH_SLOT_KIND_QUERIES,
     VH_SLOT_KIND_QUERIES, &query_self_layer},
    {VH_BLOCK_TRANSFORMER, VH_TF_BASE_ROLES, sizeof(vh_transformer_params), 0, VH_SLOT_KIND_QUERIES,
     VH_SLOT_KIND_QUERIES, &query_cross_layer},
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
    {VH_BLOCK_MLP_CHAIN, .on_queries = 1},
    {VH_BLOCK_MLP_CHAIN, .on_queries = 1, .gathers = 1},
    {VH_BLOCK_MODULATED_NORM, .on_queries = 1},
    {VH_BLOCK_TRANSFORMER, .on_queries = 1, .attends = 1},
    {VH_BLOCK_TRANSFORMER, .on_queries = 1, .attends = 1},
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
        info->n_heads = p->n_heads;
        info->mask_prefix = p->flags & VH_TF_ATTN_MASK ? p->mask_prefix : 0;
        info->tf_flags = p->flags;
        info->norm_eps = p->norm_eps;
        info->rope_theta = p->rope_theta;
        info->rope_grid = p->rope_grid;
        info->window = p->attention == VH_ATTN_WINDOWED ? p->window : 0;
        info->lora_scale = p->lora_scale;
        break;
    }
    case VH_BLOCK_MLP_CHAIN: {
        const vh_chain_params *p = (const vh_chain_params *)d->params;
        info->chain_layers = p->n_layers;
        info->chain_activation = p->activation;
        info->chain_norm_after = p->norm_after;
        info->norm_eps = p->norm_eps;
        break;
    }
    case VH_BLOCK_MODULATED_NORM:
        info->norm_eps = ((const vh_mln_params *)d->params)->norm_eps;
        break;
    case VH_BLOCK_VAE_GRU_PLANNER:
        memcpy(&info->plan, d->params, sizeof info->plan);
        break;
    default:
        break;
    }
}

vh_query_layer_shape vh_query_layer_shape_of(const vh_model_desc *m, const vh_block_desc *d, const vh_block_info *info)
{
    const vh_query_set_desc x = m->query_sets[m->slots[d->inputs[0]].tower];
    vh_query_layer_shape s = {.R = x.rows, .D = x.width, .heads = info->n_heads,
                              .pos = (info->tf_flags & VH_TF_QK_POS) != 0,
                              .cross = ((const vh_transformer_params *)d->params)->attention == VH_ATTN_CROSS};
    s.extra = !s.cross && (info->tf_flags & VH_TF_EXTRA_KEYS);
    const int64_t key_rows = s.cross || s.extra ? m->query_sets[m->slots[d->inputs[1 + s.pos]].tower].rows : 0;
    s.K = s.cross ? key_rows : s.R + key_rows;
    for (uint32_t t = 0; t < d->n_tensors; t++)
        if (d->tensors[t].role == VH_TF_UP_W && d->tensors[t].data) s.F = d->tensors[t].shape[0];
    return s;
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
        any.is_planner |= v->is_planner, any.rope_2d |= v->rope_2d, any.on_queries |= v->on_queries;
        any.gathers |= v->gathers;
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
    if (v->on_queries) {
        *needs = ROLE(VH_TF_ATTN_NORM_W) | ROLE(VH_TF_ATTN_NORM_B) | ROLE(VH_TF_Q_W) | ROLE(VH_TF_K_W) |
                 ROLE(VH_TF_V_W) | ROLE(VH_TF_O_W) | qkv_bias_roles(p->flags);
        if (p->flags & VH_TF_O_BIAS) *needs |= ROLE(VH_TF_O_B);
        if (p->mlp == VH_MLP_RELU) {
            *needs |= ROLE(VH_TF_MLP_NORM_W) | ROLE(VH_TF_MLP_NORM_B) | ROLE(VH_TF_UP_W) | ROLE(VH_TF_DOWN_W);
            if (p->flags & VH_TF_MLP_BIAS) *needs |= ROLE(VH_TF_UP_B) | ROLE(VH_TF_DOWN_B);
        }
        *may = *needs;
        return;
    }
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

/* The rows and width of QUERIES slot s of m (0, 0 when it is not one with a set). */
static vh_query_set_desc query_set_of(const vh_model_desc *m, uint32_t slot)
{
    vh_query_set_desc none = {0, 0};
    if (slot >= m->n_slots || m->slots[slot].kind != VH_SLOT_KIND_QUERIES || !m->query_sets ||
        m->slots[slot].tower >= m->n_query_sets)
        return none;
    return m->query_sets[m->slots[slot].tower];
}

/* a [rows, cols] matrix (cols < 0: a vector of rows) */
static int shaped(const vh_tensor_view *t, int64_t rows, int64_t cols)
{
    if (!t) return 0;
    return cols < 0 ? t->ndim == 1 && t->shape[0] == rows : t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols;
}

#define QUERY_FAIL(...) (snprintf(why, why_size, __VA_ARGS__), 0)

static int chain_shapes_valid(const vh_model_desc *m, const vh_block_desc *d, const char *where, char *why,
                              size_t why_size)
{
    const vh_chain_params *p = (const vh_chain_params *)d->params;
    const vh_query_set_desc out = query_set_of(m, d->output);
    if (p->n_layers < 1 || p->n_layers > 3 || p->activation > VH_CHAIN_RELU || (p->norm_after >> p->n_layers))
        return QUERY_FAIL("%s: %u layers (1 .. 3), activation %u, LayerNorms after layers 0x%x", where, p->n_layers,
                          p->activation, p->norm_after);
    int64_t in = 0, rows = -1;
    for (uint32_t i = 0; i < d->n_inputs; i++) {
        if (m->slots[d->inputs[i]].kind == VH_SLOT_KIND_TOKENS) {
            if (d->n_inputs != 1 || m->slots[d->inputs[i]].tower >= m->n_towers)
                return QUERY_FAIL("%s: gathers one tower's tokens", where);
            const vh_vit_desc *t = &m->towers[m->slots[d->inputs[i]].tower];
            in = t->embed_dim;
            if (t->n_prefix || out.rows % t->n_patches)
                return QUERY_FAIL("%s: a frame's %u rows are not whole images of %u tokens without a prefix", where,
                                  out.rows, t->n_patches);
            rows = out.rows;
            continue;
        }
        const vh_query_set_desc s = query_set_of(m, d->inputs[i]);
        if (!s.rows || (rows >= 0 && s.rows != rows))
            return QUERY_FAIL("%s: input %u has %u rows, not those of the others (%lld)", where, i, s.rows,
                              (long long)rows);
        rows = s.rows;
        in += s.width;
    }
    if (!out.rows || out.rows != rows)
        return QUERY_FAIL("%s: writes %u rows a frame from %lld", where, out.rows, (long long)rows);
    for (uint32_t l = 0; l < p->n_layers; l++) {
        const vh_tensor_view *w = vh_block_tensor(d, VH_CHAIN_FC1_W + 2 * l), *b = vh_block_tensor(d, VH_CHAIN_FC1_B + 2 * l);
        if (!w || w->ndim != 2 || w->shape[1] != in || (b && !shaped(b, w->shape[0], -1)))
            return QUERY_FAIL("%s: layer %u's weight is not [.., %lld] (or its bias not its rows)", where, l,
                              (long long)in);
        const int64_t width = w->shape[0];
        if ((p->norm_after >> l & 1u) && (!shaped(vh_block_tensor(d, VH_CHAIN_NORM1_W + 2 * l), width, -1) ||
                                          !shaped(vh_block_tensor(d, VH_CHAIN_NORM1_B + 2 * l), width, -1)))
            return QUERY_FAIL("%s: the LayerNorm after layer %u lacks its [%lld] weight or bias", where, l,
                              (long long)width);
        if (!(p->norm_after >> l & 1u) && (vh_block_tensor(d, VH_CHAIN_NORM1_W + 2 * l) ||
                                           vh_block_tensor(d, VH_CHAIN_NORM1_B + 2 * l)))
            return QUERY_FAIL("%s: a LayerNorm tensor after layer %u, which has none", where, l);
        in = width;
    }
    for (uint32_t l = p->n_layers; l < 3; l++)
        if (vh_block_tensor(d, VH_CHAIN_FC1_W + 2 * l) || vh_block_tensor(d, VH_CHAIN_FC1_B + 2 * l))
            return QUERY_FAIL("%s: a tensor of layer %u of a chain of %u", where, l, p->n_layers);
    if (in != out.width) return QUERY_FAIL("%s: gives %lld channels into a set of %u", where, (long long)in, out.width);
    return 1;
}

static int mln_shapes_valid(const vh_model_desc *m, const vh_block_desc *d, const char *where, char *why,
                            size_t why_size)
{
    const vh_query_set_desc x = query_set_of(m, d->inputs[0]), c = query_set_of(m, d->inputs[d->n_inputs - 1]);
    const vh_query_set_desc out = query_set_of(m, d->output);
    const int64_t D = x.width;
    if (d->n_inputs != 2 || c.rows != x.rows || out.rows != x.rows || out.width != x.width)
        return QUERY_FAIL("%s: reads x and its condition (the same rows) and writes x's shape", where);
    if (!shaped(vh_block_tensor(d, VH_MLN_REDUCE_W), D, c.width) || !shaped(vh_block_tensor(d, VH_MLN_REDUCE_B), D, -1) ||
        !shaped(vh_block_tensor(d, VH_MLN_GAMMA_W), D, D) || !shaped(vh_block_tensor(d, VH_MLN_GAMMA_B), D, -1) ||
        !shaped(vh_block_tensor(d, VH_MLN_BETA_W), D, D) || !shaped(vh_block_tensor(d, VH_MLN_BETA_B), D, -1))
        return QUERY_FAIL("%s: needs reduce [%lld, %u], gamma and beta [%lld, %lld], each with its bias", where,
                          (long long)D, c.width, (long long)D, (long long)D);
    return 1;
}

static int layer_shapes_valid(const vh_model_desc *m, const vh_block_desc *d, const char *where, char *why,
                              size_t why_size)
{
    const vh_transformer_params *p = (const vh_transformer_params *)d->params;
    const int pos = (p->flags & VH_TF_QK_POS) != 0;
    const int keys = p->attention == VH_ATTN_CROSS || (p->flags & VH_TF_EXTRA_KEYS);
    const uint32_t want = 1u + pos + (keys ? 1u + pos : 0u);
    if (d->n_inputs != want)
        return QUERY_FAIL("%s: %u inputs; its flags name %u (rows%s%s%s)", where, d->n_inputs, want,
                          pos ? ", their positions" : "", keys ? ", keys" : "", keys && pos ? ", their positions" : "");
    const vh_query_set_desc x = query_set_of(m, d->inputs[0]), out = query_set_of(m, d->output);
    const vh_query_set_desc xp = pos ? query_set_of(m, d->inputs[1]) : x;
    const vh_query_set_desc k = keys ? query_set_of(m, d->inputs[1 + pos]) : x;
    const vh_query_set_desc kp = keys && pos ? query_set_of(m, d->inputs[2 + pos]) : k;
    const int64_t D = x.width;
    if (out.rows != x.rows || out.width != x.width || xp.rows != x.rows || xp.width != x.width || k.width != x.width ||
        kp.rows != k.rows || kp.width != k.width)
        return QUERY_FAIL("%s: rows [%u, %u], their positions [%u, %u], keys [%u, %u] and theirs [%u, %u], output "
                          "[%u, %u]: positions must match what they add to, keys the rows' width, the output the rows",
                          where, x.rows, x.width, xp.rows, xp.width, k.rows, k.width, kp.rows, kp.width, out.rows,
                          out.width);
    if (!p->n_heads || D % p->n_heads)
        return QUERY_FAIL("%s: %u heads over %lld channels", where, p->n_heads, (long long)D);
    const uint32_t n_keys = p->attention == VH_ATTN_CROSS ? k.rows : x.rows + (keys ? k.rows : 0);
    if ((p->flags & VH_TF_ATTN_MASK) && (p->mask_prefix == 0 || p->mask_prefix >= x.rows || p->mask_prefix > n_keys))
        return QUERY_FAIL("%s: mask prefix %u for %u rows and %u keys", where, p->mask_prefix, x.rows, n_keys);
    if (!(p->flags & VH_TF_ATTN_MASK) && p->mask_prefix)
        return QUERY_FAIL("%s: a mask prefix without VH_TF_ATTN_MASK", where);
    static const uint32_t square[] = {VH_TF_Q_W, VH_TF_K_W, VH_TF_V_W, VH_TF_O_W};
    for (int i = 0; i < 4; i++)
        if (!shaped(vh_block_tensor(d, square[i]), D, D)) return QUERY_FAIL("%s: a projection not [%lld, %lld]", where,
                                                                            (long long)D, (long long)D);
    static const uint32_t vectors[] = {VH_TF_ATTN_NORM_W, VH_TF_ATTN_NORM_B, VH_TF_Q_B, VH_TF_K_B, VH_TF_V_B,
                                       VH_TF_O_B, VH_TF_MLP_NORM_W, VH_TF_MLP_NORM_B, VH_TF_DOWN_B};
    for (int i = 0; i < 9; i++) {
        const vh_tensor_view *t = vh_block_tensor(d, vectors[i]);
        if (t && !shaped(t, D, -1)) return QUERY_FAIL("%s: tensor '%s' is not [%lld]", where, t->name ? t->name : "?",
                                                      (long long)D);
    }
    if (p->mlp == VH_MLP_RELU) {
        const vh_tensor_view *up = vh_block_tensor(d, VH_TF_UP_W), *ub = vh_block_tensor(d, VH_TF_UP_B);
        if (!up || up->ndim != 2 || up->shape[1] != D || !shaped(vh_block_tensor(d, VH_TF_DOWN_W), D, up->shape[0]) ||
            (ub && !shaped(ub, up->shape[0], -1)))
            return QUERY_FAIL("%s: the MLP's up [F, %lld] and down [%lld, F] do not agree", where, (long long)D,
                              (long long)D);
    }
    return 1;
}

int vh_block_variant_query_shapes_valid(const vh_model_desc *m, const vh_block_desc *d, uint32_t index,
                                        const char *backend, char *why, size_t why_size)
{
    char where[96];
    snprintf(where, sizeof where, "%s: block %u (%s)", backend, index, vh_block_kind_name(d->kind));
    if (!query_set_of(m, d->output).rows) return QUERY_FAIL("%s: its output is a query slot without a set", where);
    for (uint32_t i = 0; i < d->n_inputs; i++)
        if (m->slots[d->inputs[i]].kind == VH_SLOT_KIND_QUERIES && !query_set_of(m, d->inputs[i]).rows)
            return QUERY_FAIL("%s: input %u is a query slot without a set", where, i);
    if (d->kind == VH_BLOCK_MLP_CHAIN) return chain_shapes_valid(m, d, where, why, why_size);
    if (d->kind == VH_BLOCK_MODULATED_NORM) return mln_shapes_valid(m, d, where, why, why_size);
    return layer_shapes_valid(m, d, where, why, why_size);
}
