#include "family/driving/eva_backbone.h"

#include <stdlib.h>
#include <string.h>

#include "image/grid_interpolate.h"
#include "model/tensor_lookup.h"

vh_eva_config vh_eva_config_agent(void)
{
    vh_eva_config c = {.img_size = 640, .patch_size = 16, .embed_dim = 1024, .depth = 24, .num_heads = 16,
                       .mlp_hidden = 2730, .window_size = 16, .pt_hw_seq_len = 16, .pretrain_img_size = 224,
                       .pretrain_use_cls_token = 1};
    for (uint32_t i = 0; i < c.depth; i++)
        if (i % 3 != 2) c.window_blocks |= 1ull << i;
    return c;
}

/* The position table: the checkpoint's [1, (cls +) g0 * g0, D] interpolated to the image's grid. */
static vh_status position_table(const vh_checkpoint *ck, const vh_eva_config *c, const char *prefix, float **out,
                                vh_error *err)
{
    const int64_t D = c->embed_dim, g0 = c->pretrain_img_size / c->patch_size, g = c->img_size / c->patch_size;
    const int64_t slots = g0 * g0 + (c->pretrain_use_cls_token ? 1 : 0);
    vh_tensor_view v;
    vh_status st = vh_tensor_takef(ck, &v, 0, VH_SHAPE(1, slots, D), err, "%spos_embed", prefix);
    if (st) return st;
    float *table = malloc(sizeof(float) * (size_t)(slots * D)), *grid = malloc(sizeof(float) * (size_t)(g * g * D));
    if (!table || !grid) {
        free(table);
        free(grid);
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (the position table)");
    }
    for (int64_t i = 0; i < slots * D; i++)
        table[i] = v.dtype == VH_DTYPE_F32 ? ((const float *)v.data)[i]
                   : v.dtype == VH_DTYPE_BF16 ? vh_bf16_to_f32(((const uint16_t *)v.data)[i])
                                              : vh_f16_to_f32(((const uint16_t *)v.data)[i]);
    /* the module interpolates in float32 whatever the weights' dtype (bf16 is not implemented) */
    vh_grid_interpolate_bicubic(table + (c->pretrain_use_cls_token ? D : 0), g0, g0, D, grid, g, g);
    free(table);
    *out = grid;
    return VH_OK;
}

vh_status vh_eva_take_blocks(vh_model *m, const vh_eva_config *c, const char *prefix, uint32_t tower,
                             const char *pixels_slot, const char *tokens_slot, uint32_t *next_block, float **pos_table,
                             vh_error *err)
{
    *pos_table = NULL;
    if (!c->patch_size || c->img_size % c->patch_size || !c->num_heads || c->embed_dim % c->num_heads ||
        (c->embed_dim / c->num_heads) % 4 || !c->depth || c->depth > 64 || tower >= VH_MAX_TOWERS ||
        !c->window_size || c->pretrain_img_size % c->patch_size)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: EVA backbone of %u x %u patches of %u, width %u in %u heads, "
                            "%u blocks, window %u: not a geometry it can have", vh_checkpoint_dir(m->checkpoint),
                            c->img_size, c->img_size, c->patch_size, c->embed_dim, c->num_heads, c->depth,
                            c->window_size);
    const int64_t D = c->embed_dim, F = c->mlp_hidden, P = c->patch_size, g = c->img_size / c->patch_size;
    vh_vit_desc *t = &m->desc.towers[tower];
    *t = (vh_vit_desc){.image_size = c->img_size, .patch_size = c->patch_size, .grid = (uint32_t)g,
                       .n_patches = (uint32_t)(g * g), .embed_dim = c->embed_dim, .n_heads = c->num_heads,
                       .head_dim = c->embed_dim / c->num_heads, .mlp_hidden = c->mlp_hidden, .n_blocks = c->depth};
    const uint32_t pixels = vh_model_slot(m, pixels_slot, VH_SLOT_KIND_PIXELS, tower);
    const uint32_t tokens = vh_model_slot(m, tokens_slot, VH_SLOT_KIND_TOKENS, tower);
    vh_status st = position_table(m->checkpoint, c, prefix, pos_table, err);
    if (st) return st;

    vh_model_block *b = vh_model_begin_block(m, (*next_block)++, VH_BLOCK_PATCH_EMBED, pixels, tokens, VH_NO_STATE);
    vh_tensor_view *w = b->by_role;
    if ((st = vh_tensor_takef(m->checkpoint, &w[VH_PATCH_EMBED_W], 0, VH_SHAPE(D, 3, P, P), err,
                              "%spatch_embed.proj.weight", prefix)) ||
        (st = vh_tensor_takef(m->checkpoint, &w[VH_PATCH_EMBED_B], 0, VH_SHAPE(D), err, "%spatch_embed.proj.bias",
                              prefix)))
        return st;
    w[VH_PATCH_EMBED_POS] = (vh_tensor_view){.data = *pos_table, .dtype = VH_DTYPE_F32, .ndim = 3,
                                             .shape = {1, g * g, D}, .name = "pos_embed (interpolated to the grid)"};

    static const struct { uint32_t role; const char *name; int rows_f, cols_f; } roles[] = {
        /* rows_f / cols_f: 1 where that side is the MLP's hidden width, 0 the model width, -1 none */
        {VH_TF_ATTN_NORM_W, "norm1.weight", 0, -1}, {VH_TF_ATTN_NORM_B, "norm1.bias", 0, -1},
        {VH_TF_Q_W, "attn.q_proj.weight", 0, 0}, {VH_TF_K_W, "attn.k_proj.weight", 0, 0},
        {VH_TF_V_W, "attn.v_proj.weight", 0, 0}, {VH_TF_Q_B, "attn.q_bias", 0, -1}, {VH_TF_V_B, "attn.v_bias", 0, -1},
        {VH_TF_O_W, "attn.proj.weight", 0, 0}, {VH_TF_O_B, "attn.proj.bias", 0, -1},
        {VH_TF_MLP_NORM_W, "norm2.weight", 0, -1}, {VH_TF_MLP_NORM_B, "norm2.bias", 0, -1},
        {VH_TF_GATE_W, "mlp.w1.weight", 1, 0}, {VH_TF_GATE_B, "mlp.w1.bias", 1, -1},
        {VH_TF_UP_W, "mlp.w2.weight", 1, 0}, {VH_TF_UP_B, "mlp.w2.bias", 1, -1},
        {VH_TF_SUB_NORM_W, "mlp.ffn_ln.weight", 1, -1}, {VH_TF_SUB_NORM_B, "mlp.ffn_ln.bias", 1, -1},
        {VH_TF_DOWN_W, "mlp.w3.weight", 0, 1}, {VH_TF_DOWN_B, "mlp.w3.bias", 0, -1},
    };
    for (uint32_t l = 0; l < c->depth; l++) {
        const int windowed = (int)(c->window_blocks >> l & 1u);
        b = vh_model_begin_block(m, (*next_block)++, VH_BLOCK_TRANSFORMER, tokens, tokens, VH_NO_STATE);
        b->params.transformer = (vh_transformer_params){
            .struct_size = sizeof(vh_transformer_params), .layer = l, .norm = VH_NORM_LAYER, .norm_eps = 1e-6f,
            .placement = VH_NORM_PRE, .attention = windowed ? VH_ATTN_WINDOWED : VH_ATTN_FULL,
            .window = windowed ? c->window_size : 0, .rope = VH_ROPE_2D_INTERLEAVED, .rope_theta = 10000.0f,
            .rope_grid = c->pt_hw_seq_len, .mlp = VH_MLP_SILU_GATED,
            .flags = VH_TF_Q_BIAS | VH_TF_V_BIAS | VH_TF_O_BIAS | VH_TF_MLP_BIAS | VH_TF_MLP_SUB_NORM};
        for (size_t r = 0; r < sizeof roles / sizeof *roles; r++) {
            const int64_t rows = roles[r].rows_f ? F : D, cols = roles[r].cols_f ? F : D;
            const vh_tensor_shape shape = roles[r].cols_f < 0 ? VH_SHAPE(rows) : VH_SHAPE(rows, cols);
            if ((st = vh_tensor_takef(m->checkpoint, &b->by_role[roles[r].role], 0, shape, err, "%sblocks.%u.%s", prefix,
                                      l, roles[r].name)))
                return st;
        }
    }
    return VH_OK;
}
