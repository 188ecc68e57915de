#include "family/orion/orion_model.h"

#include <stdlib.h>

#include "family/driving/vae_gru_planner.h"
#include "model/llama_layer.h"
#include "model/tensor_lookup.h"

#define TAKE(view, shape, ...) vh_tensor_takef(m->checkpoint, view, 0, shape, err, __VA_ARGS__)
#define SHAPE VH_SHAPE

static vh_status load_llm(vh_model *m, const vh_orion_config *c, uint32_t *next, vh_error *err)
{
    const int64_t H = c->hidden, V = c->vocab;
    const int64_t q_dim = (int64_t)c->n_heads * c->head_dim, kv_dim = (int64_t)c->n_kv_heads * c->head_dim;
    vh_status st;
    const uint32_t rows = vh_model_slot(m, "rows", VH_SLOT_KIND_ROWS, 0);
    m->llm_embed_block = *next;
    vh_model_block *b = vh_model_begin_block(m, (*next)++, VH_BLOCK_EMBED_LOOKUP,
                                             vh_model_slot(m, "vision.embeds", VH_SLOT_KIND_EMBEDS, 0), rows,
                                             VH_NO_STATE);
    if ((st = TAKE(&b->by_role[VH_EMBED_LOOKUP_TABLE], SHAPE(V, H), "%s", "model.embed_tokens.weight"))) return st;
    m->llm_first_block = *next;
    for (uint32_t i = 0; i < c->n_layers; i++) {
        b = vh_begin_llama_layer(m, (*next)++, rows, i, c->rms_eps, c->rope_theta);
        vh_tensor_view *w = b->by_role;
        if ((st = vh_take_llama_layer(m->checkpoint, "model.", i, &m->desc.llm, w, err))) return st;
        if (!c->lora_merged) { /* the adapters kept apart (fp32 parity with the unmerged original) */
            static const char *const proj[4] = {"q", "k", "v", "o"};
            const int64_t out[4] = {q_dim, kv_dim, kv_dim, H}, in[4] = {H, H, H, q_dim}, r = c->lora_rank;
            b->params.transformer.lora_sets = 1;
            b->params.transformer.lora_scale = c->lora_scale;
            for (int p = 0; p < 4; p++)
                if ((st = TAKE(&w[VH_TF_LORA + 2 * p], SHAPE(r, in[p]), "model.layers.%u.self_attn.%s_proj.lora_A.weight",
                               i, proj[p])) ||
                    (st = TAKE(&w[VH_TF_LORA + 2 * p + 1], SHAPE(out[p], r),
                               "model.layers.%u.self_attn.%s_proj.lora_B.weight", i, proj[p])))
                    return st;
        }
    }
    m->head_block = *next;
    b = vh_model_begin_block(m, (*next)++, VH_BLOCK_READOUT, rows, vh_model_slot(m, "outputs", VH_SLOT_KIND_OUTPUTS, 0),
                             VH_NO_STATE);
    return TAKE(&b->by_role[VH_READOUT_NORM], SHAPE(H), "%s", "model.norm.weight");
}

/* The camera front end before the LLM (the vision side of each frame); its tokens must be the
 * prompt's vision rows, in the LLM's width. */
static vh_status load_front_end(vh_model *m, const vh_orion_config *c, uint32_t *next, vh_error *err)
{
    vh_orion_model *om = m->family_model;
    vh_status st = vh_front_end_take_blocks(m, &c->front_end, &om->front, next, err);
    return st ? st : vh_front_end_check_tokens(m, &om->front, c->n_vision_tokens, c->hidden, err);
}

static vh_status load_planner(vh_model *m, const vh_orion_config *c, uint32_t *next, vh_error *err)
{
    vh_orion_model *om = m->family_model;
    om->planner_block = *next;
    const uint32_t outputs = vh_model_slot(m, "outputs", VH_SLOT_KIND_OUTPUTS, 0);
    vh_model_block *b = vh_model_begin_block(m, (*next)++, VH_BLOCK_VAE_GRU_PLANNER, outputs, outputs, VH_NO_STATE);
    vh_planner_params *p = &b->params.planner;
    p->feature_dim = c->hidden;
    p->latent_dim = c->latent_dim;
    p->gru_layers = c->gru_layers;
    p->gru_hidden = c->gru_hidden;
    p->n_modes = c->n_modes;
    p->n_steps = c->n_steps;
    p->min_log_sigma = c->min_log_sigma;
    p->max_log_sigma = c->max_log_sigma;
    return vh_take_vae_gru_planner(m->checkpoint, "planner.", p, b->by_role, err);
}

vh_status vh_orion_load(vh_model *m, const char *dir, const char *config_text, size_t config_len,
                        const char *config_path, vh_error *err)
{
    vh_orion_model *om = calloc(1, sizeof *om);
    if (!om) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory");
    m->family_model = om;
    vh_status st = vh_orion_config_parse(config_text, config_len, config_path, &om->config, err);
    if (st || (st = vh_checkpoint_open(dir, &m->checkpoint, err))) return st;
    const vh_orion_config *c = &om->config;
    vh_model_desc *d = &m->desc;
    d->n_towers = 0;
    d->n_image_tokens = c->n_vision_tokens;
    d->llm = (vh_llm_desc){.hidden = c->hidden, .intermediate = c->intermediate, .n_layers = c->n_layers,
                           .n_heads = c->n_heads, .n_kv_heads = c->n_kv_heads, .head_dim = c->head_dim,
                           .vocab = c->vocab, .rms_eps = c->rms_eps};
    m->max_positions = c->max_positions;
    const uint32_t front = c->front_end.present ? vh_front_end_block_count(m->checkpoint, &c->front_end) : 0;
    if ((st = vh_model_alloc_blocks(m, front + c->n_layers + 3, err))) return st;
    uint32_t next = 0;
    if (front && (st = load_front_end(m, c, &next, err))) return st;
    if ((st = load_llm(m, c, &next, err)) || (st = load_planner(m, c, &next, err))) return st;
    vh_model_finish_blocks(m);
    return VH_OK;
}

void vh_orion_unload(vh_model *m)
{
    vh_orion_model *om = m->family_model;
    if (!om) return;
    vh_orion_config_free(&om->config);
    vh_front_end_graph_free(&om->front);
    free(om);
    m->family_model = NULL;
}
