#include "family/orion/orion_config.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "family/driving/driving_config.h"

/* Orion's LLM is Vicuna-7B: an untied head; rope_theta 10000 unless given. */
static vh_status parse_text(vh_config_fields *c, const json_t *t, vh_orion_config *cfg)
{
    vh_driving_llm_config l;
    vh_status st = vh_driving_llm_config_parse(c, t, "text_config.", 10000.0f, 0, &l);
    if (st) return st;
    if (l.tied)
        return vh_error_set(c->err, VH_ERR_UNSUPPORTED, "%s: text_config.tie_word_embeddings is true; Orion's LLM has "
                            "an untied head", c->source);
    cfg->hidden = l.hidden, cfg->intermediate = l.intermediate, cfg->n_layers = l.n_layers;
    cfg->n_heads = l.n_heads, cfg->n_kv_heads = l.n_kv_heads, cfg->head_dim = l.head_dim;
    cfg->vocab = l.vocab, cfg->max_positions = l.max_positions;
    cfg->rms_eps = l.rms_eps, cfg->rope_theta = l.rope_theta, cfg->bos_id = l.bos_id, cfg->eos_id = l.eos_id;
    return VH_OK;
}

static vh_status parse_planner(vh_config_fields *c, const json_t *p, vh_orion_config *cfg)
{
    vh_driving_planner_config pl;
    vh_status st = vh_driving_planner_config_parse(c, p, "planner.", cfg->hidden, &pl);
    if (st) return st;
    cfg->latent_dim = pl.latent_dim, cfg->n_modes = pl.n_modes, cfg->n_steps = pl.n_steps;
    cfg->gru_layers = pl.gru_layers, cfg->gru_hidden = pl.gru_hidden;
    cfg->min_log_sigma = pl.min_log_sigma, cfg->max_log_sigma = pl.max_log_sigma;
    return VH_OK;
}

static vh_status parse_root(vh_config_fields *c, const json_t *root, vh_orion_config *cfg)
{
    vh_status st = VH_OK;
    const json_t *text = vh_config_object(c, root, "text_config", &st), *lora = NULL, *planner = NULL, *prompt = NULL;
    if (!st) lora = vh_config_object(c, root, "lora", &st);
    if (!st) planner = vh_config_object(c, root, "planner", &st);
    if (!st) prompt = vh_config_object(c, root, "prompt", &st);
    if (st || (st = parse_text(c, text, cfg)) || (st = parse_planner(c, planner, cfg))) return st;
    const json_t *merged = json_object_get(lora, "merged");
    if (!json_is_boolean(merged))
        return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: lora.merged must be true or false", c->source);
    cfg->lora_merged = json_is_true(merged);
    if (!cfg->lora_merged) { /* the adapters kept apart: y = W x + (alpha / r) B (A x) */
        float alpha = 0;
        if ((st = vh_config_uint(c, lora, "lora.", "r", 1, 1, 4096, &cfg->lora_rank)) ||
            (st = vh_config_float(c, lora, "lora.", "alpha", &alpha)))
            return st;
        if (!(alpha > 0))
            return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: lora.alpha must be a positive number", c->source);
        cfg->lora_scale = alpha / (float)cfg->lora_rank;
    }
    if ((st = vh_config_uint(c, root, "", "vision_tokens", 1, 1, 1u << 16, &cfg->n_vision_tokens))) return st;
    const json_t *ptext = json_object_get(prompt, "text"), *bos = json_object_get(prompt, "add_bos");
    if (!json_is_string(ptext) || json_string_length(ptext) > 65536)
        return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: prompt.text must be a string", c->source);
    snprintf(cfg->image_marker, sizeof cfg->image_marker, "<image>");
    snprintf(cfg->readout_token, sizeof cfg->readout_token, "<waypoint_ego>");
    if ((st = vh_config_string(c, prompt, "prompt.", "image_marker", cfg->image_marker, sizeof cfg->image_marker)) ||
        (st = vh_config_string(c, prompt, "prompt.", "readout_token", cfg->readout_token, sizeof cfg->readout_token)))
        return st;
    cfg->add_bos = !bos || json_is_true(bos);
    if ((st = vh_front_end_config_parse(c, root, &cfg->front_end))) return st;
    if (!(cfg->prompt = strdup(json_string_value(ptext))))
        return vh_error_set(c->err, VH_ERR_OUT_OF_MEMORY, "out of memory");
    if (!strstr(cfg->prompt, cfg->image_marker) || !strstr(cfg->prompt, cfg->readout_token))
        return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: prompt.text lacks the image marker '%s' or the read-out "
                            "token '%s'", c->source, cfg->image_marker, cfg->readout_token);
    return VH_OK;
}

vh_status vh_orion_config_parse(const char *json_text, size_t len, const char *source, vh_orion_config *cfg,
                                vh_error *err)
{
    memset(cfg, 0, sizeof *cfg);
    vh_config_fields c = {source, err};
    json_t *root = vh_config_load(json_text, len, source, err);
    if (!root) return VH_ERR_BAD_MODEL;
    vh_status st = parse_root(&c, root, cfg);
    json_decref(root);
    if (st) vh_orion_config_free(cfg);
    return st;
}

void vh_orion_config_free(vh_orion_config *cfg)
{
    free(cfg->prompt);
    memset(cfg, 0, sizeof *cfg);
}
