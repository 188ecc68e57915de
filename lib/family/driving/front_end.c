#include "family/driving/front_end.h"

#include <stdlib.h>
#include <string.h>

#include "model/tensor_lookup.h"

static vh_status float_array(vh_config_fields *c, const json_t *obj, const char *key, uint32_t n, float *out)
{
    const json_t *a = json_object_get(obj, key);
    if (!a || json_is_null(a)) return VH_OK;
    if (!json_is_array(a) || json_array_size(a) != n)
        return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: front_end.%s must be an array of %u numbers", c->source, key,
                            n);
    for (uint32_t i = 0; i < n; i++) {
        if (!json_is_number(json_array_get(a, i)))
            return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: front_end.%s[%u] is not a number", c->source, key, i);
        out[i] = (float)json_number_value(json_array_get(a, i));
    }
    return VH_OK;
}

static vh_status parse_backbone(vh_config_fields *c, const json_t *b, vh_eva_config *e)
{
    vh_status st;
    if ((st = vh_config_uint(c, b, "front_end.backbone.", "embed_dim", 1, 1, 8192, &e->embed_dim)) ||
        (st = vh_config_uint(c, b, "front_end.backbone.", "patch_size", 1, 1, 64, &e->patch_size)) ||
        (st = vh_config_uint(c, b, "front_end.backbone.", "depth", 1, 1, 64, &e->depth)) ||
        (st = vh_config_uint(c, b, "front_end.backbone.", "num_heads", 1, 1, 256, &e->num_heads)) ||
        (st = vh_config_uint(c, b, "front_end.backbone.", "img_size", 1, 16, 4096, &e->img_size)) ||
        (st = vh_config_uint(c, b, "front_end.backbone.", "window_size", 1, 0, 4096, &e->window_size)) ||
        (st = vh_config_uint(c, b, "front_end.backbone.", "mlp_hidden", 1, 1, 1u << 16, &e->mlp_hidden)))
        return st;
    const json_t *w = json_object_get(b, "window_block_indexes");
    if (!json_is_array(w))
        return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: front_end.backbone.window_block_indexes must be an array",
                            c->source);
    e->window_blocks = 0;
    for (size_t i = 0; i < json_array_size(w); i++) {
        const json_t *v = json_array_get(w, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= (json_int_t)e->depth)
            return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: front_end.backbone.window_block_indexes[%zu] is not a "
                                "block of the %u", c->source, i, e->depth);
        e->window_blocks |= 1ull << json_integer_value(v);
    }
    if (e->window_blocks && !e->window_size)
        return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: windowed backbone blocks with window_size 0", c->source);
    return VH_OK;
}

/* The heads' arguments; both heads share one memory geometry here (the agent's do). */
static vh_status parse_heads(vh_config_fields *c, const json_t *h, vh_petr_heads_config *out)
{
    vh_status st = VH_OK;
    const json_t *det = vh_config_object(c, h, "det", &st), *map = st ? NULL : vh_config_object(c, h, "map", &st);
    if (st) return st;
    uint32_t d[6] = {0}, mp[4] = {0};
    static const char *const dk[6] = {"num_heads", "memory_len", "topk_proposals", "num_propagated",
                                      "scene_memory_len", "can_bus_len"};
    static const char *const mk[4] = {"num_heads", "memory_len", "topk_proposals", "num_lanes_one2one"};
    for (int i = 0; i < 6 && !st; i++) st = vh_config_uint(c, det, "front_end.heads.det.", dk[i], 1, 1, 1u << 16, &d[i]);
    for (int i = 0; i < 4 && !st; i++) st = vh_config_uint(c, map, "front_end.heads.map.", mk[i], 1, 1, 1u << 16, &mp[i]);
    if (st) return st;
    if (d[0] != mp[0] || d[1] != mp[1] || d[2] != mp[2] || d[3] != d[2] || d[1] % d[2] || d[1] < d[2])
        return vh_error_set(c->err, VH_ERR_UNSUPPORTED, "%s: front_end.heads: det %u heads, memory %u, top-%u, %u "
                            "propagated; map %u heads, memory %u, top-%u: this version runs heads of one geometry "
                            "(the agent's: 8, 600, 300, 300) with the propagated queries the top-k and the memory "
                            "whole top-k groups", c->source, d[0], d[1], d[2], d[3], mp[0], mp[1], mp[2]);
    *out = (vh_petr_heads_config){.heads = d[0], .memory_len = d[1], .topk = d[2], .scene_len = d[4],
                                  .lanes_one2one = mp[3], .canbus_len = d[5]};
    return VH_OK;
}

vh_status vh_front_end_config_parse(vh_config_fields *c, const json_t *root, vh_front_end_config *out)
{
    memset(out, 0, sizeof *out);
    const json_t *fe = json_object_get(root, "front_end");
    if (!fe || json_is_null(fe)) return VH_OK;
    vh_status st = VH_OK;
    const json_t *b = vh_config_object(c, fe, "backbone", &st), *h = st ? NULL : vh_config_object(c, fe, "heads", &st);
    if (st) return st;
    out->present = 1;
    out->n_cameras = VH_FRONT_END_CAMERAS;
    out->backbone = vh_eva_config_agent();
    out->position = vh_petr_position_agent();
    float pc[6] = {-51.2f, -51.2f, -5.0f, 51.2f, 51.2f, 3.0f};
    if ((st = parse_backbone(c, b, &out->backbone)) || (st = parse_heads(c, h, &out->heads)) ||
        (st = float_array(c, fe, "pc_range", 6, pc)) || (st = float_array(c, fe, "position_range", 6, out->position.range)) ||
        (st = vh_config_uint(c, fe, "front_end.", "depth_num", 0, 1, 1024, &out->position.depth_num)))
        return st;
    memcpy(out->heads.pc_range, pc, sizeof pc);
    const vh_eva_config *e = &out->backbone;
    if (e->img_size % e->patch_size)
        return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: front_end.backbone: images of %u in patches of %u", c->source,
                            e->img_size, e->patch_size);
    const uint32_t grid = e->img_size / e->patch_size;
    out->position.stride = e->patch_size;
    out->position.pad_w = out->position.pad_h = e->img_size;
    out->heads.image_rows = out->n_cameras * grid * grid;
    return VH_OK;
}

uint32_t vh_front_end_block_count(const vh_checkpoint *ck, const vh_front_end_config *fe)
{
    return 1 + fe->backbone.depth + 1 + vh_petr_head_block_count(ck, 0) + vh_petr_head_block_count(ck, 1);
}

vh_status vh_front_end_take_blocks(vh_model *m, const vh_front_end_config *fe, vh_front_end_graph *g,
                                   uint32_t *next_block, vh_error *err)
{
    memset(g, 0, sizeof *g);
    g->first_block = *next_block;
    vh_status st = vh_eva_take_blocks(m, &fe->backbone, "img_backbone.", 0, "cam.pixels", "vit.tokens", next_block,
                                      &g->pos_table, err);
    if (st) return st;
    m->desc.n_towers = 1;
    g->vit_blocks = *next_block - g->first_block;
    g->pixels = vh_model_slot(m, "cam.pixels", VH_SLOT_KIND_PIXELS, 0);
    g->tokens = vh_model_slot(m, "vit.tokens", VH_SLOT_KIND_TOKENS, 0);
    /* the position encoder: [depth_num * 3] -> Linear -> ReLU -> Linear -> the heads' width */
    const uint32_t rows = fe->heads.image_rows, in = 3 * fe->position.depth_num;
    vh_tensor_view out_w;
    if ((st = vh_tensor_take(m->checkpoint, &out_w, 0, "position_encoder.2.weight", (vh_tensor_shape){2, {-1, -1}},
                             err)))
        return st;
    g->coords = vh_model_query_slot(m, "cam.coords", rows, in);
    g->pos_embed = vh_model_query_slot(m, "cam.pos_embed", rows, (uint32_t)out_w.shape[0]);
    g->position_block = *next_block;
    vh_model_block *b = vh_model_begin_block(m, (*next_block)++, VH_BLOCK_MLP_CHAIN, g->coords, g->pos_embed,
                                             VH_NO_STATE);
    b->params.chain = (vh_chain_params){.struct_size = sizeof(vh_chain_params), .n_layers = 2,
                                        .activation = VH_CHAIN_RELU};
    static const char *const names[4] = {"position_encoder.0.weight", "position_encoder.0.bias",
                                         "position_encoder.2.weight", "position_encoder.2.bias"};
    for (int i = 0; i < 4; i++) {
        const vh_tensor_shape shape = i % 2 ? (vh_tensor_shape){1, {-1}} : (vh_tensor_shape){2, {-1, -1}};
        if ((st = vh_tensor_take(m->checkpoint, &b->by_role[VH_CHAIN_FC1_W + i], 0, names[i], shape, err))) return st;
    }
    if ((st = vh_petr_head_take_blocks(m, &g->det, 0, &fe->heads, g->tokens, g->pos_embed, next_block, err)) ||
        (st = vh_petr_head_take_blocks(m, &g->map, 1, &fe->heads, g->tokens, g->pos_embed, next_block, err)))
        return st;
    return VH_OK;
}

void vh_front_end_graph_free(vh_front_end_graph *g)
{
    if (!g) return;
    vh_petr_head_free(&g->det);
    vh_petr_head_free(&g->map);
    free(g->pos_table);
    memset(g, 0, sizeof *g);
}

vh_status vh_front_end_check_tokens(const vh_model *m, const vh_front_end_graph *g, uint32_t n_vision_tokens,
                                    uint32_t hidden, vh_error *err)
{
    const uint32_t tokens = vh_petr_head_token_rows(&g->det) + vh_petr_head_token_rows(&g->map);
    if (tokens != n_vision_tokens || g->det.n.out_dims != hidden || g->map.n.out_dims != hidden)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: the front end's heads give %u tokens of %u and %u channels; the "
                            "prompt takes %u vision tokens of the LLM's %u", vh_checkpoint_dir(m->checkpoint), tokens,
                            g->det.n.out_dims, g->map.n.out_dims, n_vision_tokens, hidden);
    return VH_OK;
}
