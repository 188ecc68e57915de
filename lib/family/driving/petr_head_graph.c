/*
 * The PETR heads' blocks from a converted Orion checkpoint (tools/orion/front_end.py: the released
 * names, the shared modules at the top, branch 0 of the six identical ones), and the constants of
 * their weights the host keeps (the queries' points and their encodings, the embeddings the
 * decoders start from). The runs' order and what each block reads: petr_heads.h.
 */
#include "family/driving/petr_heads.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/tensor_lookup.h"

#define NERF_POINTS (VH_PETR_MAX_POINTS * 3 * 12) /* 396 */
#define NERF_MOTION (13 * 12)                     /* 156 */
#define LN_EPS 1e-5f

static uint32_t count_layers(const vh_checkpoint *ck, const char *prefix)
{
    char name[192];
    uint32_t n = 0;
    for (;; n++) {
        snprintf(name, sizeof name, "%stransformer.query_decoder._layers.%u.transformer_layers.0.attn.in_proj_weight",
                 prefix, n);
        if (!vh_checkpoint_find(ck, name, NULL)) return n;
    }
}

uint32_t vh_petr_head_block_count(const vh_checkpoint *ck, int map)
{
    const uint32_t layers = count_layers(ck, map ? "map_head." : "pts_bbox_head.");
    return (map ? 7 : 11) + 2 * layers;
}

/* A tensor as an fp32 host copy of its exact shape. */
static vh_status take_f32(const vh_checkpoint *ck, float **out, vh_tensor_shape shape, vh_error *err,
                          const char *fmt, const char *prefix)
{
    vh_tensor_view v;
    vh_status st = vh_tensor_takef(ck, &v, 0, shape, err, fmt, prefix);
    if (st) return st;
    size_t n = 1;
    for (uint32_t i = 0; i < v.ndim; i++) n *= (size_t)v.shape[i];
    float *a = malloc(sizeof(float) * (n ? n : 1));
    if (!a) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (%s)", v.name);
    for (size_t i = 0; i < n; i++)
        a[i] = v.dtype == VH_DTYPE_F32 ? ((const float *)v.data)[i]
               : v.dtype == VH_DTYPE_BF16 ? vh_bf16_to_f32(((const uint16_t *)v.data)[i])
                                          : vh_f16_to_f32(((const uint16_t *)v.data)[i]);
    *out = a;
    return VH_OK;
}

/* The first dimension of `prefix` + `name` (0: absent). */
static int64_t rows_of(const vh_checkpoint *ck, const char *prefix, const char *name)
{
    char full[192];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    const vh_st_tensor *t = vh_checkpoint_find(ck, full, NULL);
    return t && t->ndim >= 1 ? (int64_t)t->shape[0] : 0;
}

/* Rows [row0, row0 + rows) of a packed [3 D, D] in_proj weight (or [3 D] bias) as a view. */
static void view_rows(vh_tensor_view *dst, const vh_tensor_view *packed, int64_t row0, int64_t rows)
{
    *dst = *packed;
    const int64_t cols = packed->ndim == 2 ? packed->shape[1] : 1;
    const size_t elem = packed->dtype == VH_DTYPE_F32 ? 4 : 2;
    dst->data = (const char *)packed->data + (size_t)(row0 * cols) * elem;
    dst->shape[0] = rows;
}

typedef struct graph {
    vh_model *m;
    uint32_t *next;
    const char *prefix;
    int64_t D;
    vh_error *err;
} graph;

/* A chain of `n` linear layers `names[i]` (".weight" / ".bias" appended; the top-level modules when
 * top), LayerNorms `norms[i]` where not NULL, from `in` to `out`. */
static vh_status chain(graph *g, uint32_t in, uint32_t out, int top, uint32_t n, const char *const *names,
                       const char *const *norms, uint32_t activation)
{
    vh_model_block *b = vh_model_begin_block(g->m, (*g->next)++, VH_BLOCK_MLP_CHAIN, in, out, VH_NO_STATE);
    b->params.chain = (vh_chain_params){.struct_size = sizeof(vh_chain_params), .n_layers = n,
                                        .activation = activation, .norm_eps = LN_EPS};
    const char *prefix = top ? "" : g->prefix;
    vh_status st;
    for (uint32_t l = 0; l < n; l++) {
        const vh_checkpoint *ck = g->m->checkpoint;
        vh_tensor_view *w = &b->by_role[VH_CHAIN_FC1_W + 2 * l];
        if ((st = vh_tensor_takef(ck, w, 0, (vh_tensor_shape){2, {-1, -1}}, g->err, "%s%s.weight", prefix, names[l])) ||
            (st = vh_tensor_takef(ck, &b->by_role[VH_CHAIN_FC1_B + 2 * l], 1, (vh_tensor_shape){1, {w->shape[0]}},
                                  g->err, "%s%s.bias", prefix, names[l])))
            return st;
        if (!norms || !norms[l]) continue;
        b->params.chain.norm_after |= 1u << l;
        if ((st = vh_tensor_takef(ck, &b->by_role[VH_CHAIN_NORM1_W + 2 * l], 0, VH_SHAPE(w->shape[0]), g->err,
                                  "%s%s.weight", prefix, norms[l])) ||
            (st = vh_tensor_takef(ck, &b->by_role[VH_CHAIN_NORM1_B + 2 * l], 0, VH_SHAPE(w->shape[0]), g->err,
                                  "%s%s.bias", prefix, norms[l])))
            return st;
    }
    return VH_OK;
}

/* One attention sub-layer (and its MLP) of the released decoders, under `base` (".transformer_layers."
 * included): attn at `attn`, its norm at `norm`, the FFN at `ffn` (NULL: none) with its norm. */
static vh_status layer(graph *g, uint32_t index, const uint32_t *inputs, uint32_t n_inputs, uint32_t output,
                       uint32_t attention, uint32_t flags, uint32_t mask_prefix, uint32_t heads, const char *base,
                       int attn, int norm, int ffn, int ffn_norm)
{
    const vh_checkpoint *ck = g->m->checkpoint;
    const int64_t D = g->D;
    vh_model_block *b = vh_model_begin_block(g->m, (*g->next)++, VH_BLOCK_TRANSFORMER, inputs[0], output,
                                             VH_NO_STATE);
    for (uint32_t i = 1; i < n_inputs; i++) vh_model_add_input(g->m, *g->next - 1, inputs[i]);
    vh_tensor_view packed, packed_b;
    vh_status st = vh_tensor_takef(ck, &packed, 0, VH_SHAPE(3 * D, D), g->err, "%s%d.attn.in_proj_weight", base, attn);
    if (st || (st = vh_tensor_takef(ck, &packed_b, 1, VH_SHAPE(3 * D), g->err, "%s%d.attn.in_proj_bias", base, attn)))
        return st;
    vh_tensor_view *w = b->by_role;
    for (int i = 0; i < 3; i++) {
        view_rows(&w[VH_TF_Q_W + i], &packed, i * D, D);
        if (packed_b.data) view_rows(&w[VH_TF_Q_B + i], &packed_b, i * D, D);
    }
    if (packed_b.data) flags |= VH_TF_QKV_BIAS;
    if ((st = vh_tensor_takef(ck, &w[VH_TF_O_W], 0, VH_SHAPE(D, D), g->err, "%s%d.attn.out_proj.weight", base, attn)) ||
        (st = vh_tensor_takef(ck, &w[VH_TF_O_B], 1, VH_SHAPE(D), g->err, "%s%d.attn.out_proj.bias", base, attn)) ||
        (st = vh_tensor_takef(ck, &w[VH_TF_ATTN_NORM_W], 0, VH_SHAPE(D), g->err, "%s%d.weight", base, norm)) ||
        (st = vh_tensor_takef(ck, &w[VH_TF_ATTN_NORM_B], 0, VH_SHAPE(D), g->err, "%s%d.bias", base, norm)))
        return st;
    if (w[VH_TF_O_B].data) flags |= VH_TF_O_BIAS;
    if (ffn >= 0) {
        if ((st = vh_tensor_takef(ck, &w[VH_TF_UP_W], 0, (vh_tensor_shape){2, {-1, D}}, g->err,
                                  "%s%d._layers.0.weight", base, ffn)) ||
            (st = vh_tensor_takef(ck, &w[VH_TF_UP_B], 1, VH_SHAPE(w[VH_TF_UP_W].shape[0]), g->err,
                                  "%s%d._layers.0.bias", base, ffn)) ||
            (st = vh_tensor_takef(ck, &w[VH_TF_DOWN_W], 0, VH_SHAPE(D, w[VH_TF_UP_W].shape[0]), g->err,
                                  "%s%d._layers.3.weight", base, ffn)) ||
            (st = vh_tensor_takef(ck, &w[VH_TF_DOWN_B], 1, VH_SHAPE(D), g->err, "%s%d._layers.3.bias", base, ffn)) ||
            (st = vh_tensor_takef(ck, &w[VH_TF_MLP_NORM_W], 0, VH_SHAPE(D), g->err, "%s%d.weight", base, ffn_norm)) ||
            (st = vh_tensor_takef(ck, &w[VH_TF_MLP_NORM_B], 0, VH_SHAPE(D), g->err, "%s%d.bias", base, ffn_norm)))
            return st;
        if (w[VH_TF_UP_B].data) flags |= VH_TF_MLP_BIAS;
    }
    b->params.transformer = (vh_transformer_params){
        .struct_size = sizeof(vh_transformer_params), .layer = index, .norm = VH_NORM_LAYER, .norm_eps = LN_EPS,
        .placement = VH_NORM_POST, .attention = attention, .rope = VH_ROPE_NONE,
        .mlp = ffn >= 0 ? VH_MLP_RELU : VH_MLP_NONE, .flags = flags, .n_heads = heads,
        .mask_prefix = flags & VH_TF_ATTN_MASK ? mask_prefix : 0};
    return VH_OK;
}

static vh_status mln(graph *g, uint32_t x, uint32_t c, uint32_t out)
{
    const vh_checkpoint *ck = g->m->checkpoint;
    const int64_t D = g->D;
    vh_model_block *b = vh_model_begin_block(g->m, (*g->next)++, VH_BLOCK_MODULATED_NORM, x, out, VH_NO_STATE);
    vh_model_add_input(g->m, *g->next - 1, c);
    b->params.mln = (vh_mln_params){.struct_size = sizeof(vh_mln_params), .norm_eps = LN_EPS};
    vh_tensor_view *w = b->by_role;
    vh_status st;
    if ((st = vh_tensor_take(ck, &w[VH_MLN_REDUCE_W], 0, "ego_pose_pe.reduce.0.weight", VH_SHAPE(D, NERF_MOTION), g->err)) ||
        (st = vh_tensor_take(ck, &w[VH_MLN_REDUCE_B], 0, "ego_pose_pe.reduce.0.bias", VH_SHAPE(D), g->err)) ||
        (st = vh_tensor_take(ck, &w[VH_MLN_GAMMA_W], 0, "ego_pose_pe.gamma.weight", VH_SHAPE(D, D), g->err)) ||
        (st = vh_tensor_take(ck, &w[VH_MLN_GAMMA_B], 0, "ego_pose_pe.gamma.bias", VH_SHAPE(D), g->err)) ||
        (st = vh_tensor_take(ck, &w[VH_MLN_BETA_W], 0, "ego_pose_pe.beta.weight", VH_SHAPE(D, D), g->err)) ||
        (st = vh_tensor_take(ck, &w[VH_MLN_BETA_B], 0, "ego_pose_pe.beta.bias", VH_SHAPE(D), g->err)))
        return st;
    return VH_OK;
}

/* The sizes from the checkpoint's shapes. */
static vh_status read_sizes(const vh_checkpoint *ck, const char *prefix, int map, const vh_petr_heads_config *c,
                            vh_petr_head_sizes *n, vh_error *err)
{
    n->embed = (uint32_t)rows_of(ck, prefix, "input_projection.weight");
    const vh_st_tensor *ip = NULL;
    char name[192];
    snprintf(name, sizeof name, "%sinput_projection.weight", prefix);
    ip = vh_checkpoint_find(ck, name, NULL);
    n->in_channels = ip && ip->ndim == 2 ? (uint32_t)ip->shape[1] : 0;
    n->out_dims = (uint32_t)rows_of(ck, prefix, "output_projection.weight");
    n->layers = count_layers(ck, prefix);
    n->extra = (uint32_t)rows_of(ck, prefix, "query_embedding.weight");
    n->classes = (uint32_t)rows_of(ck, prefix, "cls_branches.0.6.weight");
    n->reg_out = (uint32_t)rows_of(ck, prefix, "reg_branches.0.4.weight");
    if (map) {
        n->queries = c->lanes_one2one;
        n->propagated = 0;
        if (rows_of(ck, prefix, "instance_embedding_lane.weight") < c->lanes_one2one || n->reg_out != 3 * VH_PETR_MAX_POINTS)
            return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: map_head: %lld lanes for %u one-to-one, %u lane outputs "
                                "(%d expected)", vh_checkpoint_dir(ck),
                                (long long)rows_of(ck, prefix, "instance_embedding_lane.weight"), c->lanes_one2one,
                                n->reg_out, 3 * VH_PETR_MAX_POINTS);
    } else {
        n->queries = (uint32_t)rows_of(ck, prefix, "reference_points.weight");
        n->propagated = (uint32_t)rows_of(ck, prefix, "pseudo_reference_points.weight");
        n->num_memory = (uint32_t)rows_of(ck, prefix, "memory_query.weight");
        if (n->propagated != c->topk || n->reg_out < 3 || c->memory_len < n->propagated)
            return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: pts_bbox_head: %u propagated queries for a top-%u of a "
                                "memory of %u, %u box outputs", vh_checkpoint_dir(ck), n->propagated, c->topk,
                                c->memory_len, n->reg_out);
        /* OrionHead.forward takes the extra queries' zero points as reference_points[:num_extra]:
         * with fewer object queries than extra ones its own shapes do not agree (it fails) */
        if (n->queries < n->extra)
            return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: pts_bbox_head: %u object queries for %u extra ones: "
                                "the released head needs at least as many (its reference points of the extra "
                                "queries are reference_points[:num_extra])", vh_checkpoint_dir(ck), n->queries,
                                n->extra);
    }
    if (!n->embed || !n->in_channels || !n->out_dims || !n->layers || !n->extra || !n->classes || !n->queries ||
        !c->heads || n->embed % c->heads || !c->memory_len || !c->image_rows)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: %s: width %u from %u channels to %u, %u layers, %u extra "
                            "and %u queries, %u classes, %u heads: not a head it can run", vh_checkpoint_dir(ck),
                            prefix, n->embed, n->in_channels, n->out_dims, n->layers, n->extra, n->queries,
                            n->classes, c->heads);
    return VH_OK;
}

static float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/* The queries' points (in [0, 1]) and their encodings: det reference_points (the extra queries at
 * 0), map sigmoid(reference_points_lane(instance + point embeddings)) of the one-to-one lanes. */
static vh_status query_constants(const vh_checkpoint *ck, vh_petr_head *h, const float pc_range[6], vh_error *err)
{
    const vh_petr_head_sizes *n = &h->n;
    const uint32_t D = n->embed, P = h->map ? VH_PETR_MAX_POINTS : 1;
    const char *prefix = h->map ? "map_head." : "pts_bbox_head.";
    h->query_ref = malloc(sizeof(float) * n->queries * 3 * P);
    h->query_pt_enc = malloc(sizeof(float) * (size_t)(n->extra + n->queries) * NERF_POINTS);
    if (!h->query_ref || !h->query_pt_enc) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (queries)");
    vh_status st = take_f32(ck, &h->query_embedding, VH_SHAPE(n->extra, D), err, "%squery_embedding.weight", prefix);
    if (st) return st;
    if (h->map) {
        float *inst = NULL, *pts = NULL, *w = NULL, *b = NULL;
        const int64_t lanes = rows_of(ck, prefix, "instance_embedding_lane.weight");
        if (!(st = take_f32(ck, &inst, VH_SHAPE(lanes, D), err, "%sinstance_embedding_lane.weight", prefix)) &&
            !(st = take_f32(ck, &pts, VH_SHAPE(VH_PETR_MAX_POINTS, D), err, "%spoints_embedding_lane.weight", prefix)) &&
            !(st = take_f32(ck, &w, VH_SHAPE(3, D), err, "%sreference_points_lane.weight", prefix)) &&
            !(st = take_f32(ck, &b, VH_SHAPE(3), err, "%sreference_points_lane.bias", prefix))) {
            for (uint32_t l = 0; l < n->queries; l++)
                for (uint32_t p = 0; p < VH_PETR_MAX_POINTS; p++)
                    for (uint32_t k = 0; k < 3; k++) {
                        float acc = 0.0f;
                        for (uint32_t j = 0; j < D; j++) acc += w[k * D + j] * (inst[(size_t)l * D + j] + pts[p * D + j]);
                        h->query_ref[(l * VH_PETR_MAX_POINTS + p) * 3 + k] = sigmoid(acc + b[k]);
                    }
            h->lane_embedding = inst; /* its first `queries` rows are the one-to-one lanes */
            inst = NULL;
        }
        free(inst);
        free(pts);
        free(w);
        free(b);
        if (st) return st;
        for (uint32_t l = 0; l < n->queries; l++)
            vh_nerf_encode(h->query_ref + (size_t)l * 3 * VH_PETR_MAX_POINTS, 3 * VH_PETR_MAX_POINTS,
                           h->query_pt_enc + (size_t)(n->extra + l) * NERF_POINTS);
        /* the extra queries' positions are zeroed after query_pos: any encoding will do */
        for (uint32_t q = 0; q < n->extra; q++)
            memcpy(h->query_pt_enc + (size_t)q * NERF_POINTS, h->query_pt_enc + (size_t)n->extra * NERF_POINTS,
                   sizeof(float) * NERF_POINTS);
        return VH_OK;
    }
    float *ref = NULL;
    if ((st = take_f32(ck, &ref, VH_SHAPE(n->queries, 3), err, "%sreference_points.weight", prefix))) return st;
    memcpy(h->query_ref, ref, sizeof(float) * n->queries * 3);
    free(ref);
    float rep[VH_PETR_MAX_POINTS * 3];
    for (uint32_t q = 0; q < n->extra + n->queries; q++) {
        for (uint32_t p = 0; p < VH_PETR_MAX_POINTS; p++)
            for (uint32_t k = 0; k < 3; k++) rep[p * 3 + k] = q < n->extra ? 0.0f : h->query_ref[(q - n->extra) * 3 + k];
        vh_nerf_encode(rep, VH_PETR_MAX_POINTS * 3, h->query_pt_enc + (size_t)q * NERF_POINTS);
    }
    if ((st = take_f32(ck, &h->memory_query, VH_SHAPE(n->num_memory, D), err, "%smemory_query.weight", prefix)))
        return st;
    float *pseudo = NULL;
    if ((st = take_f32(ck, &pseudo, VH_SHAPE(n->propagated, 3), err, "%spseudo_reference_points.weight", prefix)))
        return st;
    h->pseudo_points = malloc(sizeof(float) * n->propagated * 3);
    if (h->pseudo_points) vh_petr_pseudo_points(pseudo, n->propagated, pc_range, h->pseudo_points);
    free(pseudo);
    return h->pseudo_points ? VH_OK : vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (pseudo points)");
}

vh_status vh_petr_head_take_blocks(vh_model *m, vh_petr_head *h, int map, const vh_petr_heads_config *c,
                                   uint32_t features, uint32_t pos_embed, uint32_t *next_block, vh_error *err)
{
    memset(h, 0, sizeof *h);
    h->map = map;
    const char *prefix = map ? "map_head." : "pts_bbox_head.";
    vh_status st = read_sizes(m->checkpoint, prefix, map, c, &h->n, err);
    if (st) return st;
    const vh_petr_head_sizes *n = &h->n;
    if ((st = query_constants(m->checkpoint, h, c->pc_range, err))) return st;
    const uint32_t D = n->embed, M = c->memory_len, Q0 = n->extra + n->queries, R = Q0 + n->propagated;
    const uint32_t S = c->scene_len, NM = n->num_memory, I = c->image_rows;
    graph g = {m, next_block, prefix, D, err};
    h->features = features, h->pos_embed = pos_embed, h->first_block = *next_block;
#define SLOT(det_name, map_name, rows, width) vh_model_query_slot(m, map ? map_name : det_name, rows, width)
    h->pt_enc = SLOT("det.pt_enc", "map.pt_enc", M + Q0, NERF_POINTS);
    h->pt_pos = SLOT("det.pt_pos", "map.pt_pos", M + Q0, D);
    h->age_enc = SLOT("det.age_enc", "map.age_enc", M + 1, 256);
    h->age_pos = SLOT("det.age_pos", "map.age_pos", M + 1, D);
    const uint32_t memory = SLOT("det.memory", "map.memory", I, D);
    h->mem_pos0 = SLOT("det.mem_pos0", "map.mem_pos0", M, D);
    h->motion_enc = SLOT("det.motion_enc", "map.motion_enc", M, NERF_MOTION);
    h->mem_pos1 = SLOT("det.mem_pos1", "map.mem_pos1", M, D);
    h->x = SLOT("det.x", "map.x", R, D);
    h->x_pos = SLOT("det.x_pos", "map.x_pos", R, D);
    h->extra_rows = SLOT("det.extra", "map.extra", M - n->propagated, D);
    h->extra_pos = SLOT("det.extra_pos", "map.extra_pos", M - n->propagated, D);
    h->obj = SLOT("det.obj", "map.obj", n->queries + n->propagated, D);
    h->vlm = SLOT("det.vlm", "map.vlm", n->extra, D);
    h->logits = SLOT("det.logits", "map.logits", n->queries + n->propagated, n->classes);
    h->boxes = SLOT("det.boxes", "map.boxes", n->queries + n->propagated, n->reg_out);
    h->scene_enc = h->scene_q = h->hq = h->hq_pos = h->canbus = h->can_token = VH_MODEL_MAX_SLOTS;
    h->out_in = map ? h->vlm : SLOT("det.out_in", "", n->extra + NM, D);
    h->tokens = SLOT("det.tokens", "map.tokens", map ? n->extra : n->extra + NM, n->out_dims);
    uint32_t scene_pos = VH_MODEL_MAX_SLOTS;
    if (!map) {
        h->scene_enc = SLOT("det.scene_enc", "", S, 256);
        scene_pos = SLOT("det.scene_pos", "", S, D);
        h->scene_q = SLOT("det.scene_q", "", S, D);
        h->hq = SLOT("det.history", "", NM, D);
        h->hq_pos = SLOT("det.history_pos", "", NM, D);
        h->canbus = SLOT("det.canbus", "", 1, VH_PETR_CANBUS * (1 + c->canbus_len) + 16 * (M / c->topk));
        h->can_token = SLOT("det.can_token", "", 1, n->out_dims);
    }
#undef SLOT
    static const char *const qpos[] = {"query_pos.0", "query_pos.2"}, *const time[] = {"time_embedding.0"},
                             *const time_norm[] = {"time_embedding.1"}, *const scene[] = {"scene_time_embedding.0"},
                             *const scene_norm[] = {"scene_time_embedding.1"}, *const inproj[] = {"input_projection"},
                             *const outproj[] = {"output_projection"}, *const canbus[] = {"can_bus_embed.0", "can_bus_embed.2"},
                             *const cls[] = {"cls_branches.0.0", "cls_branches.0.3", "cls_branches.0.6"},
                             *const cls_norm[] = {"cls_branches.0.1", "cls_branches.0.4", NULL},
                             *const reg[] = {"reg_branches.0.0", "reg_branches.0.2", "reg_branches.0.4"};
    /* A: positions of the memory and the queries, the ages', the image features' projection */
    h->run_first[0] = *next_block;
    if ((st = chain(&g, h->pt_enc, h->pt_pos, 1, 2, qpos, NULL, VH_CHAIN_RELU)) ||
        (st = chain(&g, h->age_enc, h->age_pos, 1, 1, time, time_norm, VH_CHAIN_RELU)) ||
        (!map && (st = chain(&g, h->scene_enc, scene_pos, 0, 1, scene, scene_norm, VH_CHAIN_RELU))) ||
        (st = chain(&g, features, memory, 0, 1, inproj, NULL, VH_CHAIN_RELU)))
        return st;
    h->run_count[0] = *next_block - h->run_first[0];
    /* B: the ego motion's modulation of the memory's positions */
    h->run_first[1] = *next_block;
    if ((st = mln(&g, h->mem_pos0, h->motion_enc, h->mem_pos1))) return st;
    h->run_count[1] = 1;
    /* C: (det: memory_decoder_mq) the decoder */
    h->run_first[2] = *next_block;
    char base[160];
    if (!map) {
        snprintf(base, sizeof base, "%smemory_decoder_mq._layers.0.transformer_layers.", prefix);
        const uint32_t in[4] = {h->hq, h->hq_pos, h->scene_q, scene_pos};
        if ((st = layer(&g, 0, in, 4, h->hq, VH_ATTN_CROSS, VH_TF_QK_POS, 0, c->heads, base, 0, 1, 2, 3))) return st;
    }
    for (uint32_t l = 0; l < n->layers; l++) {
        snprintf(base, sizeof base, "%stransformer.query_decoder._layers.%u.transformer_layers.", prefix, l);
        const uint32_t sa[4] = {h->x, h->x_pos, h->extra_rows, h->extra_pos}, ca[4] = {h->x, h->x_pos, memory, pos_embed};
        if ((st = layer(&g, l, sa, 4, h->x, VH_ATTN_FULL, VH_TF_QK_POS | VH_TF_EXTRA_KEYS | VH_TF_ATTN_MASK, n->extra,
                        c->heads, base, 0, 1, -1, -1)) ||
            (st = layer(&g, l, ca, 4, h->x, VH_ATTN_CROSS, VH_TF_QK_POS, 0, c->heads, base, 2, 3, 4, 5)))
            return st;
    }
    h->run_count[2] = *next_block - h->run_first[2];
    /* D: the branches on the last layer's queries; det memory_decoder_cq, map the tokens */
    h->run_first[3] = *next_block;
    if ((st = chain(&g, h->obj, h->logits, 0, 3, cls, cls_norm, VH_CHAIN_RELU)) ||
        (st = chain(&g, h->obj, h->boxes, 0, 3, reg, NULL, VH_CHAIN_RELU)))
        return st;
    if (map) {
        if ((st = chain(&g, h->vlm, h->tokens, 0, 1, outproj, NULL, VH_CHAIN_RELU))) return st;
    } else {
        snprintf(base, sizeof base, "%smemory_decoder_cq._layers.0.transformer_layers.", prefix);
        const uint32_t in[2] = {h->hq, h->vlm};
        if ((st = layer(&g, 0, in, 2, h->hq, VH_ATTN_CROSS, 0, 0, c->heads, base, 0, 1, 2, 3))) return st;
    }
    h->run_count[3] = *next_block - h->run_first[3];
    if (!map) { /* E: the tokens */
        h->run_first[4] = *next_block;
        if ((st = chain(&g, h->out_in, h->tokens, 0, 1, outproj, NULL, VH_CHAIN_RELU)) ||
            (st = chain(&g, h->canbus, h->can_token, 0, 2, canbus, NULL, VH_CHAIN_RELU)))
            return st;
        h->run_count[4] = *next_block - h->run_first[4];
    }
    return VH_OK;
}

void vh_petr_head_free(vh_petr_head *h)
{
    if (!h) return;
    free(h->query_pt_enc);
    free(h->query_ref);
    free(h->query_embedding);
    free(h->lane_embedding);
    free(h->memory_query);
    free(h->pseudo_points);
    memset(h, 0, sizeof *h);
}
