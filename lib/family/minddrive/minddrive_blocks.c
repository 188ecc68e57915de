#include "family/minddrive/minddrive_model.h"

#include <stdlib.h>

#include "family/driving/vae_gru_planner.h"
#include "model/llama_layer.h"
#include "model/tensor_lookup.h"

/* Qwen2's attention biases and the two experts' adapters (the converter's --lora keep names), as
 * the layer's flag and LoRA sets. */
static vh_status take_qwen2_extras(const vh_checkpoint *ck, const vh_minddrive_config *c, uint32_t i,
                                   vh_tensor_view *w, vh_error *err)
{
    static const char *const proj[4] = {"q", "k", "v", "o"};
    const int64_t H = c->llm.hidden, q_dim = (int64_t)c->llm.n_heads * c->llm.head_dim;
    const int64_t kv_dim = (int64_t)c->llm.n_kv_heads * c->llm.head_dim, r = c->lora_rank;
    const int64_t out[4] = {q_dim, kv_dim, kv_dim, H}, in[4] = {H, H, H, q_dim};
    vh_status st;
    for (int p = 0; p < 3; p++)
        if ((st = vh_tensor_takef(ck, &w[VH_TF_Q_B + p], 0, VH_SHAPE(out[p]), err,
                                  "model.layers.%u.self_attn.%s_proj.bias", i, proj[p])))
            return st;
    for (uint32_t set = 0; set < 2; set++) {
        const int first = (int)vh_tf_lora_role(set, 0);
        for (int p = 0; p < 4; p++)
            if ((st = vh_tensor_takef(ck, &w[first + 2 * p], 0, VH_SHAPE(r, in[p]), err,
                                      "model.layers.%u.self_attn.%s_proj.lora_A.%s.weight", i, proj[p],
                                      c->experts[set])) ||
                (st = vh_tensor_takef(ck, &w[first + 2 * p + 1], 0, VH_SHAPE(out[p], r), err,
                                      "model.layers.%u.self_attn.%s_proj.lora_B.%s.weight", i, proj[p],
                                      c->experts[set])))
                return st;
    }
    return VH_OK;
}

static vh_status load_llm(vh_model *m, const vh_minddrive_config *c, uint32_t *next, vh_error *err)
{
    vh_minddrive_model *mm = m->family_model;
    vh_status st;
    const uint32_t rows = vh_model_slot(m, "rows", VH_SLOT_KIND_ROWS, 0);
    m->llm_embed_block = *next;
    vh_model_block *b = vh_model_begin_block(m, (*next)++, VH_BLOCK_EMBED_LOOKUP,
                                             vh_model_slot(m, "vision.embeds", VH_SLOT_KIND_EMBEDS, 0), rows,
                                             VH_NO_STATE);
    if ((st = vh_tensor_takef(m->checkpoint, &b->by_role[VH_EMBED_LOOKUP_TABLE], 0,
                              VH_SHAPE(c->llm.vocab, c->llm.hidden), err, "%s", "model.embed_tokens.weight")))
        return st;
    mm->embed = b->by_role[VH_EMBED_LOOKUP_TABLE];
    m->llm_first_block = *next;
    for (uint32_t i = 0; i < c->llm.n_layers; i++) {
        b = vh_begin_llama_layer(m, (*next)++, rows, i, c->llm.rms_eps, c->llm.rope_theta);
        b->params.transformer.flags |= VH_TF_QKV_BIAS;
        b->params.transformer.lora_sets = 2;
        b->params.transformer.lora_scale = c->lora_scale;
        if ((st = vh_take_llama_layer(m->checkpoint, "model.", i, &m->desc.llm, b->by_role, err)) ||
            (st = take_qwen2_extras(m->checkpoint, c, i, b->by_role, err)))
            return st;
    }
    m->head_block = *next;
    b = vh_model_begin_block(m, (*next)++, VH_BLOCK_READOUT, rows, vh_model_slot(m, "outputs", VH_SLOT_KIND_OUTPUTS, 0),
                             VH_NO_STATE);
    return vh_tensor_takef(m->checkpoint, &b->by_role[VH_READOUT_NORM], 0, VH_SHAPE(c->llm.hidden), err, "%s",
                           "model.norm.weight");
}

/* A planner block on the action round's hidden rows [speed feature, path feature]: its feature is
 * row `feature_row`, its noise and outputs at the given offsets of each segment's arrays. */
static vh_status load_planner(vh_model *m, const vh_driving_planner_config *pc, const char *prefix, uint32_t feature_row,
                              uint32_t noise_offset, uint32_t out_offset, uint32_t *block, uint32_t *next,
                              vh_error *err)
{
    *block = *next;
    const uint32_t outputs = vh_model_slot(m, "outputs", VH_SLOT_KIND_OUTPUTS, 0);
    vh_model_block *b = vh_model_begin_block(m, (*next)++, VH_BLOCK_VAE_GRU_PLANNER, outputs, outputs, VH_NO_STATE);
    vh_planner_params *p = &b->params.planner;
    p->feature_dim = m->desc.llm.hidden;
    p->latent_dim = pc->latent_dim;
    p->gru_layers = pc->gru_layers;
    p->gru_hidden = pc->gru_hidden;
    p->n_modes = pc->n_modes;
    p->n_steps = pc->n_steps;
    p->min_log_sigma = pc->min_log_sigma;
    p->max_log_sigma = pc->max_log_sigma;
    p->feature_row = feature_row;
    p->noise_offset = noise_offset;
    p->out_offset = out_offset;
    return vh_take_vae_gru_planner(m->checkpoint, prefix, p, b->by_role, err);
}

vh_status vh_minddrive_load(vh_model *m, const char *dir, const char *config_text, size_t config_len,
                            const char *config_path, vh_error *err)
{
    vh_minddrive_model *mm = calloc(1, sizeof *mm);
    if (!mm) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory");
    m->family_model = mm;
    vh_status st = vh_minddrive_config_parse(config_text, config_len, config_path, &mm->config, err);
    if (st || (st = vh_checkpoint_open(dir, &m->checkpoint, err))) return st;
    const vh_minddrive_config *c = &mm->config;
    const vh_driving_llm_config *l = &c->llm;
    vh_model_desc *d = &m->desc;
    d->n_towers = 0;
    d->n_image_tokens = c->n_vision_tokens;
    d->llm = (vh_llm_desc){.hidden = l->hidden, .intermediate = l->intermediate, .n_layers = l->n_layers,
                           .n_heads = l->n_heads, .n_kv_heads = l->n_kv_heads, .head_dim = l->head_dim,
                           .vocab = l->vocab, .rms_eps = l->rms_eps};
    m->max_positions = l->max_positions;
    const uint32_t front = c->front_end.present ? vh_front_end_block_count(m->checkpoint, &c->front_end) : 0;
    if ((st = vh_model_alloc_blocks(m, front + l->n_layers + 4, err))) return st;
    /* plan outputs per segment: the speed planner's, then the path planner's (preds, mu, log_sigma) */
    const uint32_t speed_out = 2 * c->speed.n_modes * c->speed.n_steps + 2 * c->speed.latent_dim;
    uint32_t next = 0;
    if (front && ((st = vh_front_end_take_blocks(m, &c->front_end, &mm->front, &next, err)) ||
                  (st = vh_front_end_check_tokens(m, &mm->front, c->n_vision_tokens, l->hidden, err))))
        return st;
    if ((st = load_llm(m, c, &next, err)) ||
        (st = load_planner(m, &c->speed, "planner.speed.", 0, 0, 0, &mm->speed_planner_block, &next, err)) ||
        (st = load_planner(m, &c->path, "planner.path.", 1, c->speed.latent_dim, speed_out, &mm->path_planner_block,
                           &next, err)))
        return st;
    vh_model_finish_blocks(m);
    return VH_OK;
}

void vh_minddrive_unload(vh_model *m)
{
    vh_minddrive_model *mm = m->family_model;
    if (!mm) return;
    vh_minddrive_config_free(&mm->config);
    vh_front_end_graph_free(&mm->front);
    free(mm);
    m->family_model = NULL;
}
