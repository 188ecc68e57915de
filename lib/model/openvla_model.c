#include "model/openvla_model.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/file_read.h"

#define MAX_CONFIG_BYTES (64u << 20)

typedef struct loader {
    vh_model *model;
    vh_error *err;
} loader;

static const char *const tower_prefix[VH_MAX_TOWERS] = {
    "vision_backbone.featurizer.",
    "vision_backbone.fused_featurizer.",
};

static int to_vh_dtype(vh_st_dtype st, vh_dtype *out)
{
    switch (st) {
    case VH_ST_F32: *out = VH_DTYPE_F32; return 1;
    case VH_ST_F16: *out = VH_DTYPE_F16; return 1;
    case VH_ST_BF16: *out = VH_DTYPE_BF16; return 1;
    default: return 0;
    }
}

static void format_shape(char *buf, size_t size, uint32_t ndim, const int64_t *shape)
{
    size_t used = (size_t)snprintf(buf, size, "[");
    for (uint32_t i = 0; i < ndim && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (used < size) snprintf(buf + used, size - used, "]");
}

typedef struct tensor_shape {
    uint32_t ndim;
    int64_t dims[4];
} tensor_shape;

/* Look a tensor up, check it is a float tensor of exactly `shape`, and fill `view`.
 * Absent + optional: view->data = NULL, VH_OK. */
static vh_status take(loader *L, vh_tensor_view *view, int optional, const char *name, tensor_shape shape)
{
    memset(view, 0, sizeof *view);
    vh_st_file *file = NULL;
    const vh_st_tensor *t = vh_checkpoint_find(L->model->checkpoint, name, &file);
    if (!t) {
        if (optional) return VH_OK;
        return vh_error_set(L->err, VH_ERR_BAD_MODEL, "%s: tensor '%s' is missing from the checkpoint",
                            vh_checkpoint_dir(L->model->checkpoint), name);
    }
    const char *file_name = vh_st_path(file);
    vh_dtype dtype;
    if (!to_vh_dtype(t->dtype, &dtype)) {
        return vh_error_set(L->err, VH_ERR_BAD_MODEL, "%s: tensor '%s' has dtype %s; expected F32, F16 or BF16",
                            file_name, name, vh_st_dtype_name(t->dtype));
    }
    int ok = t->ndim == shape.ndim;
    for (uint32_t i = 0; ok && i < shape.ndim; i++) ok = t->shape[i] == (uint64_t)shape.dims[i];
    if (!ok) {
        char want[128], got[128];
        int64_t got_dims[8];
        uint32_t got_ndim = t->ndim < 8 ? t->ndim : 8;
        for (uint32_t i = 0; i < got_ndim; i++) got_dims[i] = (int64_t)t->shape[i];
        format_shape(want, sizeof want, shape.ndim, shape.dims);
        format_shape(got, sizeof got, got_ndim, got_dims);
        return vh_error_set(L->err, VH_ERR_BAD_MODEL, "%s: tensor '%s' has shape %s; the config implies %s",
                            file_name, name, got, want);
    }
    const void *data = NULL;
    vh_status st = vh_st_data(file, t, &data, L->err);
    if (st) return st;
    view->data = data;
    view->dtype = dtype;
    view->ndim = shape.ndim;
    for (uint32_t i = 0; i < shape.ndim; i++) view->shape[i] = shape.dims[i];
    view->name = t->name;
    return VH_OK;
}

/* take() with a printf-formatted name. */
static vh_status takef(loader *L, vh_tensor_view *view, int optional, tensor_shape shape, const char *fmt, ...)
    VH_PRINTF(5, 6);
static vh_status takef(loader *L, vh_tensor_view *view, int optional, tensor_shape shape, const char *fmt, ...)
{
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    return take(L, view, optional, name, shape);
}

#define SHAPE(...) ((tensor_shape){(uint32_t)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), {__VA_ARGS__}})

static void describe_tower(const vh_vision_tower_config *tc, vh_vit_desc *d)
{
    d->image_size = tc->image_size;
    d->patch_size = tc->patch_size;
    d->grid = tc->image_size / tc->patch_size;
    d->n_patches = d->grid * d->grid;
    d->embed_dim = tc->embed_dim;
    d->n_heads = tc->n_heads;
    d->head_dim = tc->embed_dim / tc->n_heads;
    d->mlp_hidden = tc->mlp_hidden;
    d->n_blocks = tc->depth - 1;
    d->has_class_token = tc->class_token;
    d->n_registers = tc->n_registers;
    d->n_prefix = tc->class_token + tc->n_registers;
    d->layer_scale = tc->layer_scale;
    d->norm_eps = 1e-6f; /* timm's LayerNorm default for these models */
}

static vh_status load_tower(loader *L, uint32_t t, uint32_t *next_block)
{
    vh_model *m = L->model;
    vh_vit_desc *d = &m->desc.towers[t];
    const char *pre = tower_prefix[t];
    const int64_t D = d->embed_dim, H = d->mlp_hidden, P = d->patch_size;
    vh_status st;

    m->tower_first_block[t] = *next_block;
    vh_block_desc *b = &m->blocks[(*next_block)++];
    b->kind = VH_BLOCK_VIT_EMBED;
    b->tower = t;
    b->n_tensors = VH_VIT_EMBED_N_TENSORS;
    vh_tensor_view *w = b->tensors;
    if ((st = takef(L, &w[VH_VIT_EMBED_PATCH_W], 0, SHAPE(D, 3, P, P), "%spatch_embed.proj.weight", pre)) ||
        (st = takef(L, &w[VH_VIT_EMBED_PATCH_B], 0, SHAPE(D), "%spatch_embed.proj.bias", pre)) ||
        (st = takef(L, &w[VH_VIT_EMBED_CLS], !d->has_class_token, SHAPE(1, 1, D), "%scls_token", pre)) ||
        (st = takef(L, &w[VH_VIT_EMBED_REG], d->n_registers == 0, SHAPE(1, d->n_registers, D), "%sreg_token", pre)))
        return st;
    const char *dir = vh_checkpoint_dir(m->checkpoint);
    if (d->has_class_token && !w[VH_VIT_EMBED_CLS].data)
        return vh_error_set(L->err, VH_ERR_BAD_MODEL, "%s: tensor '%scls_token' is missing", dir, pre);
    if (w[VH_VIT_EMBED_CLS].data && !d->has_class_token)
        return vh_error_set(L->err, VH_ERR_BAD_MODEL, "%s: tensor '%scls_token' exists but the config gives the "
                            "tower no class token", dir, pre);
    if (d->n_registers && !w[VH_VIT_EMBED_REG].data)
        return vh_error_set(L->err, VH_ERR_BAD_MODEL, "%s: tensor '%sreg_token' is missing", dir, pre);

    /* timm: no_embed_class models (DINOv2) add positions to the patches only, then prepend the
     * prefix tokens; others concatenate first and add positions to every token. */
    st = takef(L, &w[VH_VIT_EMBED_POS], 0, SHAPE(1, d->n_patches, D), "%spos_embed", pre);
    if (st && d->n_prefix) {
        vh_error_clear(L->err);
        st = takef(L, &w[VH_VIT_EMBED_POS], 0, SHAPE(1, d->n_patches + d->n_prefix, D), "%spos_embed", pre);
        d->pos_embed_prefix = 1;
    }
    if (st) return st;

    for (uint32_t i = 0; i < d->n_blocks; i++) {
        b = &m->blocks[(*next_block)++];
        b->kind = VH_BLOCK_VIT;
        b->tower = t;
        b->layer = i;
        b->n_tensors = VH_VIT_N_TENSORS;
        w = b->tensors;
        if ((st = takef(L, &w[VH_VIT_NORM1_W], 0, SHAPE(D), "%sblocks.%u.norm1.weight", pre, i)) ||
            (st = takef(L, &w[VH_VIT_NORM1_B], 0, SHAPE(D), "%sblocks.%u.norm1.bias", pre, i)) ||
            (st = takef(L, &w[VH_VIT_QKV_W], 0, SHAPE(3 * D, D), "%sblocks.%u.attn.qkv.weight", pre, i)) ||
            (st = takef(L, &w[VH_VIT_QKV_B], 0, SHAPE(3 * D), "%sblocks.%u.attn.qkv.bias", pre, i)) ||
            (st = takef(L, &w[VH_VIT_PROJ_W], 0, SHAPE(D, D), "%sblocks.%u.attn.proj.weight", pre, i)) ||
            (st = takef(L, &w[VH_VIT_PROJ_B], 0, SHAPE(D), "%sblocks.%u.attn.proj.bias", pre, i)) ||
            (st = takef(L, &w[VH_VIT_NORM2_W], 0, SHAPE(D), "%sblocks.%u.norm2.weight", pre, i)) ||
            (st = takef(L, &w[VH_VIT_NORM2_B], 0, SHAPE(D), "%sblocks.%u.norm2.bias", pre, i)) ||
            (st = takef(L, &w[VH_VIT_FC1_W], 0, SHAPE(H, D), "%sblocks.%u.mlp.fc1.weight", pre, i)) ||
            (st = takef(L, &w[VH_VIT_FC1_B], 0, SHAPE(H), "%sblocks.%u.mlp.fc1.bias", pre, i)) ||
            (st = takef(L, &w[VH_VIT_FC2_W], 0, SHAPE(D, H), "%sblocks.%u.mlp.fc2.weight", pre, i)) ||
            (st = takef(L, &w[VH_VIT_FC2_B], 0, SHAPE(D), "%sblocks.%u.mlp.fc2.bias", pre, i)))
            return st;
        if (d->layer_scale) {
            /* OpenVLA's HF port renames timm's LayerScale `gamma` to `scale_factor`. */
            if ((st = takef(L, &w[VH_VIT_LS1], 0, SHAPE(D), "%sblocks.%u.ls1.scale_factor", pre, i)) ||
                (st = takef(L, &w[VH_VIT_LS2], 0, SHAPE(D), "%sblocks.%u.ls2.scale_factor", pre, i)))
                return st;
        }
    }
    return VH_OK;
}

static vh_status load_projector(loader *L, uint32_t *next_block)
{
    vh_model *m = L->model;
    const int64_t Dv = m->desc.vision_dim, Dl = m->desc.llm.hidden, H1 = m->desc.projector_hidden;
    m->projector_block = *next_block;
    vh_block_desc *b = &m->blocks[(*next_block)++];
    b->kind = VH_BLOCK_PROJECTOR;
    b->n_tensors = VH_PROJ_N_TENSORS;
    vh_tensor_view *w = b->tensors;
    vh_status st;
    if ((st = takef(L, &w[VH_PROJ_FC1_W], 0, SHAPE(H1, Dv), "%s", "projector.fc1.weight")) ||
        (st = takef(L, &w[VH_PROJ_FC1_B], 0, SHAPE(H1), "%s", "projector.fc1.bias")) ||
        (st = takef(L, &w[VH_PROJ_FC2_W], 0, SHAPE(Dl, H1), "%s", "projector.fc2.weight")) ||
        (st = takef(L, &w[VH_PROJ_FC2_B], 0, SHAPE(Dl), "%s", "projector.fc2.bias")))
        return st;
    if (m->desc.projector_layers == 3) {
        if ((st = takef(L, &w[VH_PROJ_FC3_W], 0, SHAPE(Dl, Dl), "%s", "projector.fc3.weight")) ||
            (st = takef(L, &w[VH_PROJ_FC3_B], 0, SHAPE(Dl), "%s", "projector.fc3.bias")))
            return st;
    }
    return VH_OK;
}

static vh_status load_llm(loader *L, uint32_t *next_block)
{
    vh_model *m = L->model;
    const vh_llm_desc *l = &m->desc.llm;
    const int64_t Dl = l->hidden, F = l->intermediate, V = l->vocab;
    const int64_t q_dim = (int64_t)l->n_heads * l->head_dim, kv_dim = (int64_t)l->n_kv_heads * l->head_dim;
    const char *pre = "language_model.model.";
    vh_status st;

    m->llm_embed_block = *next_block;
    vh_block_desc *b = &m->blocks[(*next_block)++];
    b->kind = VH_BLOCK_LLM_EMBED;
    b->n_tensors = VH_LLM_EMBED_N_TENSORS;
    if ((st = takef(L, &b->tensors[VH_LLM_EMBED_TOKENS], 0, SHAPE(V, Dl), "%sembed_tokens.weight", pre))) return st;
    const vh_tensor_view embed = b->tensors[VH_LLM_EMBED_TOKENS];

    m->llm_first_block = *next_block;
    for (uint32_t i = 0; i < l->n_layers; i++) {
        b = &m->blocks[(*next_block)++];
        b->kind = VH_BLOCK_LLM;
        b->layer = i;
        b->n_tensors = VH_LLM_N_TENSORS;
        vh_tensor_view *w = b->tensors;
        if ((st = takef(L, &w[VH_LLM_ATTN_NORM], 0, SHAPE(Dl), "%slayers.%u.input_layernorm.weight", pre, i)) ||
            (st = takef(L, &w[VH_LLM_Q], 0, SHAPE(q_dim, Dl), "%slayers.%u.self_attn.q_proj.weight", pre, i)) ||
            (st = takef(L, &w[VH_LLM_K], 0, SHAPE(kv_dim, Dl), "%slayers.%u.self_attn.k_proj.weight", pre, i)) ||
            (st = takef(L, &w[VH_LLM_V], 0, SHAPE(kv_dim, Dl), "%slayers.%u.self_attn.v_proj.weight", pre, i)) ||
            (st = takef(L, &w[VH_LLM_O], 0, SHAPE(Dl, q_dim), "%slayers.%u.self_attn.o_proj.weight", pre, i)) ||
            (st = takef(L, &w[VH_LLM_MLP_NORM], 0, SHAPE(Dl), "%slayers.%u.post_attention_layernorm.weight", pre, i)) ||
            (st = takef(L, &w[VH_LLM_GATE], 0, SHAPE(F, Dl), "%slayers.%u.mlp.gate_proj.weight", pre, i)) ||
            (st = takef(L, &w[VH_LLM_UP], 0, SHAPE(F, Dl), "%slayers.%u.mlp.up_proj.weight", pre, i)) ||
            (st = takef(L, &w[VH_LLM_DOWN], 0, SHAPE(Dl, F), "%slayers.%u.mlp.down_proj.weight", pre, i)))
            return st;
    }

    m->head_block = *next_block;
    b = &m->blocks[(*next_block)++];
    b->kind = VH_BLOCK_LLM_HEAD;
    b->n_tensors = VH_LLM_HEAD_N_TENSORS;
    if ((st = takef(L, &b->tensors[VH_LLM_HEAD_NORM], 0, SHAPE(Dl), "%snorm.weight", pre))) return st;
    if ((st = takef(L, &b->tensors[VH_LLM_HEAD_LM], m->config.tie_word_embeddings, SHAPE(V, Dl), "%s", "language_model.lm_head.weight")))
        return st;
    if (!b->tensors[VH_LLM_HEAD_LM].data) b->tensors[VH_LLM_HEAD_LM] = embed; /* tied embeddings */
    return VH_OK;
}

/* Read an optional small JSON file of the folder; *text NULL when absent. */
static vh_status read_folder_file(const char *dir, const char *name, int optional, char **text, size_t *len,
                                  char *path, size_t path_size, vh_error *err)
{
    *text = NULL;
    snprintf(path, path_size, "%s/%s", dir, name);
    vh_status st = vh_read_text_file(path, MAX_CONFIG_BYTES, text, len, err);
    if (st == VH_ERR_IO && optional) {
        vh_error_clear(err);
        return VH_OK;
    }
    return st;
}

static vh_status load(const char *dir, vh_model *m, vh_error *err)
{
    struct stat st_dir;
    if (stat(dir, &st_dir) != 0)
        return vh_error_set(err, VH_ERR_IO, "model folder %s: %s", dir, strerror(errno));
    if (!S_ISDIR(st_dir.st_mode))
        return vh_error_set(err, VH_ERR_IO, "model path %s is not a folder (give the checkpoint folder)", dir);
    char path[4096];
    char *text = NULL;
    size_t len = 0;
    vh_status st = read_folder_file(dir, "config.json", 0, &text, &len, path, sizeof path, err);
    if (st) return st;
    st = vh_openvla_config_parse(text, len, path, &m->config, err);
    free(text);
    if (st) return st;

    if ((st = read_folder_file(dir, "preprocessor_config.json", 1, &text, &len, path, sizeof path, err)))
        return st;
    if (text) {
        st = vh_openvla_config_apply_preprocessor(&m->config, text, len, path, err);
        free(text);
        if (st) return st;
    }

    if ((st = vh_checkpoint_open(dir, &m->checkpoint, err))) return st;

    const vh_openvla_config *c = &m->config;
    vh_model_desc *d = &m->desc;
    d->n_towers = c->n_towers;
    uint32_t n_blocks = 0;
    for (uint32_t t = 0; t < c->n_towers; t++) {
        describe_tower(&c->towers[t], &d->towers[t]);
        d->vision_dim += d->towers[t].embed_dim;
        n_blocks += 1 + d->towers[t].n_blocks;
    }
    d->n_image_tokens = d->towers[0].n_patches;
    d->projector_layers = c->projector_layers;
    d->projector_hidden = c->projector_layers == 3 ? 4 * d->vision_dim : c->hidden;
    d->llm = (vh_llm_desc){
        .hidden = c->hidden, .intermediate = c->intermediate, .n_layers = c->n_layers,
        .n_heads = c->n_heads, .n_kv_heads = c->n_kv_heads, .head_dim = c->head_dim,
        .vocab = c->vocab, .rms_eps = c->rms_eps, .rope_theta = c->rope_theta,
    };
    n_blocks += 1 /* projector */ + 1 /* embed */ + c->n_layers + 1 /* head */;

    m->blocks = calloc(n_blocks, sizeof *m->blocks);
    if (!m->blocks) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (%u blocks)", n_blocks);
    d->blocks = m->blocks;
    d->n_blocks = n_blocks;

    loader L = {m, err};
    uint32_t next = 0;
    for (uint32_t t = 0; t < c->n_towers; t++)
        if ((st = load_tower(&L, t, &next))) return st;
    if ((st = load_projector(&L, &next)) || (st = load_llm(&L, &next))) return st;
    return VH_OK;
}

vh_status vh_model_load(const char *dir, vh_model **model, vh_error *err)
{
    *model = NULL;
    vh_model *m = calloc(1, sizeof *m);
    if (!m) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory");
    vh_status st = load(dir, m, err);
    if (st) {
        vh_model_free(m);
        return st;
    }
    *model = m;
    return VH_OK;
}

void vh_model_free(vh_model *m)
{
    if (!m) return;
    free(m->blocks);
    vh_checkpoint_close(m->checkpoint);
    vh_openvla_config_free(&m->config);
    free(m);
}
