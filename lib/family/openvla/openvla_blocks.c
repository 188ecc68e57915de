#include "family/openvla/openvla_model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model/llama_layer.h"
#include "model/tensor_lookup.h"
#include "util/file_read.h"

#define MAX_CONFIG_BYTES (64u << 20)

typedef struct loader {
    vh_model *model;
    vh_openvla_model *ov;
    vh_error *err;
} loader;

/* A tensor of the checkpoint, checked (model/tensor_lookup.h). */
#define takef(L, view, optional, shape, ...) vh_tensor_takef((L)->model->checkpoint, view, optional, shape, (L)->err, __VA_ARGS__)
#define SHAPE VH_SHAPE

static const char *const tower_prefix[VH_MAX_TOWERS] = {
    "vision_backbone.featurizer.",
    "vision_backbone.fused_featurizer.",
};
/* The graph's slots: each tower's pixels and tokens, the image embeddings, the rows, the outputs. */
static const char *const tower_pixels[VH_MAX_TOWERS] = {"featurizer.pixels", "fused_featurizer.pixels"};
static const char *const tower_tokens[VH_MAX_TOWERS] = {"featurizer.tokens", "fused_featurizer.tokens"};

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
}

static vh_status load_tower(loader *L, uint32_t t, uint32_t *next_block)
{
    vh_model *m = L->model;
    vh_vit_desc *d = &m->desc.towers[t];
    const char *pre = tower_prefix[t];
    const int64_t D = d->embed_dim, H = d->mlp_hidden, P = d->patch_size;
    const uint32_t pixels = vh_model_slot(m, tower_pixels[t], VH_SLOT_KIND_PIXELS, t);
    const uint32_t tokens = vh_model_slot(m, tower_tokens[t], VH_SLOT_KIND_TOKENS, t);
    vh_status st;

    L->ov->tower_first_block[t] = *next_block;
    vh_model_block *b = vh_model_begin_block(m, (*next_block)++, VH_BLOCK_PATCH_EMBED, pixels, tokens, VH_NO_STATE);
    vh_tensor_view *w = b->by_role;
    if ((st = takef(L, &w[VH_PATCH_EMBED_W], 0, SHAPE(D, 3, P, P), "%spatch_embed.proj.weight", pre)) ||
        (st = takef(L, &w[VH_PATCH_EMBED_B], 0, SHAPE(D), "%spatch_embed.proj.bias", pre)) ||
        (st = takef(L, &w[VH_PATCH_EMBED_CLS], !d->has_class_token, SHAPE(1, 1, D), "%scls_token", pre)) ||
        (st = takef(L, &w[VH_PATCH_EMBED_REG], d->n_registers == 0, SHAPE(1, d->n_registers, D), "%sreg_token", pre)))
        return st;
    const char *dir = vh_checkpoint_dir(m->checkpoint);
    if (d->has_class_token && !w[VH_PATCH_EMBED_CLS].data)
        return vh_error_set(L->err, VH_ERR_BAD_MODEL, "%s: tensor '%scls_token' is missing", dir, pre);
    if (w[VH_PATCH_EMBED_CLS].data && !d->has_class_token)
        return vh_error_set(L->err, VH_ERR_BAD_MODEL, "%s: tensor '%scls_token' exists but the config gives the "
                            "tower no class token", dir, pre);
    if (d->n_registers && !w[VH_PATCH_EMBED_REG].data)
        return vh_error_set(L->err, VH_ERR_BAD_MODEL, "%s: tensor '%sreg_token' is missing", dir, pre);

    /* timm: no_embed_class models (DINOv2) add positions to the patches only, then prepend the
     * prefix tokens; others concatenate first and add positions to every token. */
    st = takef(L, &w[VH_PATCH_EMBED_POS], 0, SHAPE(1, d->n_patches, D), "%spos_embed", pre);
    if (st && d->n_prefix) {
        vh_error_clear(L->err);
        st = takef(L, &w[VH_PATCH_EMBED_POS], 0, SHAPE(1, d->n_patches + d->n_prefix, D), "%spos_embed", pre);
        b->params.patch.flags |= VH_PATCH_POS_PREFIX;
    }
    if (st) return st;

    for (uint32_t i = 0; i < d->n_blocks; i++) {
        /* timm's pre-norm ViT block: LayerNorm (eps 1e-6, timm's default for these models), full
         * attention with fused q|k|v, GELU MLP, biases everywhere, LayerScale where configured */
        b = vh_model_begin_block(m, (*next_block)++, VH_BLOCK_TRANSFORMER, tokens, tokens, VH_NO_STATE);
        b->params.transformer = (vh_transformer_params){
            .struct_size = sizeof(vh_transformer_params), .layer = i, .norm = VH_NORM_LAYER, .norm_eps = 1e-6f,
            .placement = VH_NORM_PRE, .attention = VH_ATTN_FULL, .rope = VH_ROPE_NONE, .mlp = VH_MLP_GELU,
            .flags = VH_TF_FUSED_QKV | VH_TF_QKV_BIAS | VH_TF_O_BIAS | VH_TF_MLP_BIAS |
                     (L->ov->config.towers[t].layer_scale ? VH_TF_LAYER_SCALE : 0)};
        w = b->by_role;
        if ((st = takef(L, &w[VH_TF_ATTN_NORM_W], 0, SHAPE(D), "%sblocks.%u.norm1.weight", pre, i)) ||
            (st = takef(L, &w[VH_TF_ATTN_NORM_B], 0, SHAPE(D), "%sblocks.%u.norm1.bias", pre, i)) ||
            (st = takef(L, &w[VH_TF_QKV_W], 0, SHAPE(3 * D, D), "%sblocks.%u.attn.qkv.weight", pre, i)) ||
            (st = takef(L, &w[VH_TF_QKV_B], 0, SHAPE(3 * D), "%sblocks.%u.attn.qkv.bias", pre, i)) ||
            (st = takef(L, &w[VH_TF_O_W], 0, SHAPE(D, D), "%sblocks.%u.attn.proj.weight", pre, i)) ||
            (st = takef(L, &w[VH_TF_O_B], 0, SHAPE(D), "%sblocks.%u.attn.proj.bias", pre, i)) ||
            (st = takef(L, &w[VH_TF_MLP_NORM_W], 0, SHAPE(D), "%sblocks.%u.norm2.weight", pre, i)) ||
            (st = takef(L, &w[VH_TF_MLP_NORM_B], 0, SHAPE(D), "%sblocks.%u.norm2.bias", pre, i)) ||
            (st = takef(L, &w[VH_TF_UP_W], 0, SHAPE(H, D), "%sblocks.%u.mlp.fc1.weight", pre, i)) ||
            (st = takef(L, &w[VH_TF_UP_B], 0, SHAPE(H), "%sblocks.%u.mlp.fc1.bias", pre, i)) ||
            (st = takef(L, &w[VH_TF_DOWN_W], 0, SHAPE(D, H), "%sblocks.%u.mlp.fc2.weight", pre, i)) ||
            (st = takef(L, &w[VH_TF_DOWN_B], 0, SHAPE(D), "%sblocks.%u.mlp.fc2.bias", pre, i)))
            return st;
        if (L->ov->config.towers[t].layer_scale) {
            /* OpenVLA's HF port renames timm's LayerScale `gamma` to `scale_factor`. */
            if ((st = takef(L, &w[VH_TF_LS1], 0, SHAPE(D), "%sblocks.%u.ls1.scale_factor", pre, i)) ||
                (st = takef(L, &w[VH_TF_LS2], 0, SHAPE(D), "%sblocks.%u.ls2.scale_factor", pre, i)))
                return st;
        }
    }
    return VH_OK;
}

static vh_status load_projector(loader *L, uint32_t *next_block)
{
    vh_model *m = L->model;
    const int64_t Dv = m->desc.vision_dim, Dl = m->desc.llm.hidden, H1 = m->desc.projector_hidden;
    const uint32_t layers = L->ov->config.projector_layers;
    L->ov->projector_block = *next_block;
    vh_model_block *b = vh_model_begin_block(m, *next_block, VH_BLOCK_MLP_CHAIN,
                                             vh_model_slot(m, tower_tokens[0], VH_SLOT_KIND_TOKENS, 0),
                                             vh_model_slot(m, "image.embeds", VH_SLOT_KIND_EMBEDS, 0), VH_NO_STATE);
    for (uint32_t t = 1; t < m->desc.n_towers; t++)
        vh_model_add_input(m, *next_block, vh_model_slot(m, tower_tokens[t], VH_SLOT_KIND_TOKENS, t));
    (*next_block)++;
    b->params.chain.n_layers = layers;
    vh_tensor_view *w = b->by_role;
    vh_status st;
    if ((st = takef(L, &w[VH_CHAIN_FC1_W], 0, SHAPE(H1, Dv), "%s", "projector.fc1.weight")) ||
        (st = takef(L, &w[VH_CHAIN_FC1_B], 0, SHAPE(H1), "%s", "projector.fc1.bias")) ||
        (st = takef(L, &w[VH_CHAIN_FC2_W], 0, SHAPE(Dl, H1), "%s", "projector.fc2.weight")) ||
        (st = takef(L, &w[VH_CHAIN_FC2_B], 0, SHAPE(Dl), "%s", "projector.fc2.bias")))
        return st;
    if (layers == 3) {
        if ((st = takef(L, &w[VH_CHAIN_FC3_W], 0, SHAPE(Dl, Dl), "%s", "projector.fc3.weight")) ||
            (st = takef(L, &w[VH_CHAIN_FC3_B], 0, SHAPE(Dl), "%s", "projector.fc3.bias")))
            return st;
    }
    return VH_OK;
}

static vh_status load_llm(loader *L, uint32_t *next_block)
{
    vh_model *m = L->model;
    const vh_llm_desc *l = &m->desc.llm;
    const int64_t Dl = l->hidden, V = l->vocab;
    const char *pre = "language_model.model.";
    vh_status st;

    const uint32_t rows = vh_model_slot(m, "rows", VH_SLOT_KIND_ROWS, 0);
    m->llm_embed_block = *next_block;
    vh_model_block *b = vh_model_begin_block(m, (*next_block)++, VH_BLOCK_EMBED_LOOKUP,
                                             vh_model_slot(m, "image.embeds", VH_SLOT_KIND_EMBEDS, 0), rows, VH_NO_STATE);
    if ((st = takef(L, &b->by_role[VH_EMBED_LOOKUP_TABLE], 0, SHAPE(V, Dl), "%sembed_tokens.weight", pre))) return st;
    const vh_tensor_view embed = b->by_role[VH_EMBED_LOOKUP_TABLE];

    m->llm_first_block = *next_block;
    for (uint32_t i = 0; i < l->n_layers; i++) {
        b = vh_begin_llama_layer(m, (*next_block)++, rows, i, L->ov->config.rms_eps, L->ov->config.rope_theta);
        vh_tensor_view *w = b->by_role;
        if ((st = vh_take_llama_layer(m->checkpoint, pre, i, l, w, L->err))) return st;
    }

    m->head_block = *next_block;
    b = vh_model_begin_block(m, (*next_block)++, VH_BLOCK_READOUT, rows,
                             vh_model_slot(m, "outputs", VH_SLOT_KIND_OUTPUTS, 0), VH_NO_STATE);
    if ((st = takef(L, &b->by_role[VH_READOUT_NORM], 0, SHAPE(Dl), "%snorm.weight", pre))) return st;
    if ((st = takef(L, &b->by_role[VH_READOUT_VOCAB], L->ov->config.tie_word_embeddings, SHAPE(V, Dl), "%s", "language_model.lm_head.weight")))
        return st;
    if (!b->by_role[VH_READOUT_VOCAB].data) b->by_role[VH_READOUT_VOCAB] = embed; /* tied embeddings */
    return VH_OK;
}

/* Read a small JSON file of the folder; an optional one that does not exist gives *text NULL.
 * One that exists but cannot be read (permissions, a directory, a FIFO) is an error, never
 * silently replaced by defaults. */
static vh_status read_folder_file(const char *dir, const char *name, int optional, char **text, size_t *len,
                                  char *path, size_t path_size, vh_error *err)
{
    *text = NULL;
    snprintf(path, path_size, "%s/%s", dir, name);
    struct stat st;
    if (optional && lstat(path, &st) != 0 && errno == ENOENT) return VH_OK;
    return vh_read_text_file(path, MAX_CONFIG_BYTES, text, len, err);
}

vh_status vh_openvla_load(vh_model *m, const char *dir, const char *config_text, size_t config_len,
                          const char *config_path, vh_error *err)
{
    vh_openvla_model *ov = calloc(1, sizeof *ov);
    if (!ov) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory");
    m->family_model = ov;
    vh_status st = vh_openvla_config_parse(config_text, config_len, config_path, &ov->config, err);
    if (st) return st;

    char path[4096];
    char *text = NULL;
    size_t len = 0;
    if ((st = read_folder_file(dir, "preprocessor_config.json", 1, &text, &len, path, sizeof path, err)))
        return st;
    if (text) {
        st = vh_openvla_config_apply_preprocessor(&ov->config, text, len, path, err);
        free(text);
        if (st) return st;
    }
    if ((st = read_folder_file(dir, "dataset_statistics.json", 1, &text, &len, path, sizeof path, err)))
        return st;
    if (text) {
        st = vh_openvla_config_apply_dataset_statistics(&ov->config, text, len, path, err);
        free(text);
        if (st) return st;
    }
    if ((st = vh_openvla_config_check_datasets(&ov->config, dir, err))) return st;

    if ((st = vh_checkpoint_open(dir, &m->checkpoint, err))) return st;

    const vh_openvla_config *c = &ov->config;
    vh_model_desc *d = &m->desc;
    d->n_towers = c->n_towers;
    uint32_t n_blocks = 0;
    for (uint32_t t = 0; t < c->n_towers; t++) {
        describe_tower(&c->towers[t], &d->towers[t]);
        d->vision_dim += d->towers[t].embed_dim;
        n_blocks += 1 + d->towers[t].n_blocks;
    }
    d->n_image_tokens = d->towers[0].n_patches;
    d->projector_hidden = c->projector_layers == 3 ? 4 * d->vision_dim : c->hidden;
    d->llm = (vh_llm_desc){
        .hidden = c->hidden, .intermediate = c->intermediate, .n_layers = c->n_layers,
        .n_heads = c->n_heads, .n_kv_heads = c->n_kv_heads, .head_dim = c->head_dim,
        .vocab = c->vocab, .rms_eps = c->rms_eps,
    };
    m->max_positions = c->max_positions;
    n_blocks += 1 /* projector */ + 1 /* embed */ + c->n_layers + 1 /* head */;
    if ((st = vh_model_alloc_blocks(m, n_blocks, err))) return st;

    loader L = {m, ov, err};
    uint32_t next = 0;
    for (uint32_t t = 0; t < c->n_towers; t++)
        if ((st = load_tower(&L, t, &next))) return st;
    if ((st = load_projector(&L, &next)) || (st = load_llm(&L, &next))) return st;
    vh_model_finish_blocks(m);
    return VH_OK;
}

void vh_openvla_unload(vh_model *m)
{
    vh_openvla_model *ov = m->family_model;
    if (!ov) return;
    vh_openvla_config_free(&ov->config);
    free(ov);
    m->family_model = NULL;
}
