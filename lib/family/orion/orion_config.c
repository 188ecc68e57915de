#include "family/orion/orion_config.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct parse_ctx {
    const char *source;
    vh_error *err;
} parse_ctx;

/* An integer field in [lo, hi]; absent: *out keeps its default unless required. */
static vh_status get_uint(parse_ctx *c, const json_t *obj, const char *section, const char *key, int required,
                          uint32_t lo, uint32_t hi, uint32_t *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        if (!required) return VH_OK;
        return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: %s%s is missing", c->source, section, key);
    }
    if (!json_is_integer(v) || json_integer_value(v) < (json_int_t)lo || json_integer_value(v) > (json_int_t)hi)
        return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: %s%s must be an integer in [%u, %u]", c->source, section,
                            key, lo, hi);
    *out = (uint32_t)json_integer_value(v);
    return VH_OK;
}

static vh_status get_int(parse_ctx *c, const json_t *obj, const char *section, const char *key, int32_t *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return VH_OK;
    if (!json_is_integer(v) || json_integer_value(v) < -1 || json_integer_value(v) > INT32_MAX)
        return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: %s%s must be an integer id", c->source, section, key);
    *out = (int32_t)json_integer_value(v);
    return VH_OK;
}

static vh_status get_float(parse_ctx *c, const json_t *obj, const char *section, const char *key, float *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return VH_OK;
    if (!json_is_number(v) || !isfinite(json_number_value(v)))
        return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: %s%s must be a number", c->source, section, key);
    *out = (float)json_number_value(v);
    return VH_OK;
}

static vh_status get_string(parse_ctx *c, const json_t *obj, const char *section, const char *key, char *out,
                            size_t size)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return VH_OK;
    if (!json_is_string(v) || json_string_length(v) + 1 > size)
        return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: %s%s must be a string of at most %zu bytes", c->source,
                            section, key, size - 1);
    memcpy(out, json_string_value(v), json_string_length(v) + 1);
    return VH_OK;
}

static const json_t *section(parse_ctx *c, const json_t *root, const char *key, vh_status *st)
{
    const json_t *v = json_object_get(root, key);
    if (!json_is_object(v)) *st = vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: '%s' must be an object", c->source, key);
    return v;
}

static vh_status parse_text(parse_ctx *c, const json_t *t, vh_orion_config *cfg)
{
    const char *s = "text_config.";
    vh_status st;
    const json_t *act = json_object_get(t, "hidden_act");
    if (act && (!json_is_string(act) || strcmp(json_string_value(act), "silu") != 0))
        return vh_error_set(c->err, VH_ERR_UNSUPPORTED, "%s: %shidden_act must be 'silu'", c->source, s);
    const json_t *tie = json_object_get(t, "tie_word_embeddings");
    if (tie && json_is_true(tie))
        return vh_error_set(c->err, VH_ERR_UNSUPPORTED, "%s: %stie_word_embeddings is true; Orion's LLM has an "
                            "untied head", c->source, s);
    cfg->rope_theta = 10000.0f;
    cfg->rms_eps = 1e-6f;
    cfg->bos_id = 1;
    cfg->eos_id = 2;
    if ((st = get_uint(c, t, s, "hidden_size", 1, 1, 1u << 16, &cfg->hidden)) ||
        (st = get_uint(c, t, s, "intermediate_size", 1, 1, 1u << 18, &cfg->intermediate)) ||
        (st = get_uint(c, t, s, "num_hidden_layers", 1, 1, 1024, &cfg->n_layers)) ||
        (st = get_uint(c, t, s, "num_attention_heads", 1, 1, 1024, &cfg->n_heads)) ||
        (st = get_uint(c, t, s, "vocab_size", 1, 1, 1u << 22, &cfg->vocab)) ||
        (st = get_uint(c, t, s, "max_position_embeddings", 1, 1, 1u << 22, &cfg->max_positions)) ||
        (st = get_float(c, t, s, "rms_norm_eps", &cfg->rms_eps)) || (st = get_float(c, t, s, "rope_theta", &cfg->rope_theta)) ||
        (st = get_int(c, t, s, "bos_token_id", &cfg->bos_id)) || (st = get_int(c, t, s, "eos_token_id", &cfg->eos_id)))
        return st;
    cfg->n_kv_heads = cfg->n_heads;
    cfg->head_dim = cfg->hidden / cfg->n_heads;
    if ((st = get_uint(c, t, s, "num_key_value_heads", 0, 1, 1024, &cfg->n_kv_heads)) ||
        (st = get_uint(c, t, s, "head_dim", 0, 2, 1024, &cfg->head_dim)))
        return st;
    if (cfg->n_heads % cfg->n_kv_heads || cfg->head_dim % 2 || cfg->hidden % 4 || cfg->rms_eps <= 0 ||
        cfg->rope_theta <= 0)
        return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: %s: %u heads over %u KV heads of width %u, hidden %u, "
                            "rms_norm_eps %g, rope_theta %g do not make a Llama", c->source, s, cfg->n_heads,
                            cfg->n_kv_heads, cfg->head_dim, cfg->hidden, cfg->rms_eps, cfg->rope_theta);
    return VH_OK;
}

static vh_status parse_planner(parse_ctx *c, const json_t *p, vh_orion_config *cfg)
{
    const char *s = "planner.";
    const json_t *type = json_object_get(p, "type");
    if (!json_is_string(type) || strcmp(json_string_value(type), "vae_gru") != 0)
        return vh_error_set(c->err, VH_ERR_UNSUPPORTED, "%s: %stype must be 'vae_gru' (the released agent's planner)",
                            c->source, s);
    cfg->min_log_sigma = -5.0f;
    cfg->max_log_sigma = 5.0f;
    vh_status st;
    if ((st = get_uint(c, p, s, "latent_dim", 1, 1, 4096, &cfg->latent_dim)) ||
        (st = get_uint(c, p, s, "ego_fut_mode", 1, 1, 64, &cfg->n_modes)) ||
        (st = get_uint(c, p, s, "fut_ts", 1, 1, VH_MAX_TRAJECTORY_POINTS, &cfg->n_steps)) ||
        (st = get_uint(c, p, s, "gru_layers", 1, 1, VH_PLAN_MAX_GRU_LAYERS, &cfg->gru_layers)) ||
        (st = get_uint(c, p, s, "gru_hidden", 1, 1, 1u << 16, &cfg->gru_hidden)) ||
        (st = get_float(c, p, s, "min_log_sigma", &cfg->min_log_sigma)) ||
        (st = get_float(c, p, s, "max_log_sigma", &cfg->max_log_sigma)))
        return st;
    if (cfg->gru_layers * cfg->gru_hidden != cfg->hidden || cfg->min_log_sigma > cfg->max_log_sigma)
        return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: %s%u GRU layers of %u must split the LLM's hidden size %u "
                            "(the feature is the layers' initial states)", c->source, s, cfg->gru_layers,
                            cfg->gru_hidden, cfg->hidden);
    if ((uint64_t)cfg->n_modes * cfg->n_steps * 2 + 2ull * cfg->latent_dim > VH_MAX_ACTION_EXTRA_FLOATS)
        return vh_error_set(c->err, VH_ERR_UNSUPPORTED, "%s: %s%u modes of %u steps and a latent of %u do not fit an "
                            "action's extras", c->source, s, cfg->n_modes, cfg->n_steps, cfg->latent_dim);
    return VH_OK;
}

static vh_status parse_root(parse_ctx *c, const json_t *root, vh_orion_config *cfg)
{
    vh_status st = VH_OK;
    const json_t *text = section(c, root, "text_config", &st), *lora = NULL, *planner = NULL, *prompt = NULL;
    if (!st) lora = section(c, root, "lora", &st);
    if (!st) planner = section(c, root, "planner", &st);
    if (!st) prompt = section(c, root, "prompt", &st);
    if (st || (st = parse_text(c, text, cfg)) || (st = parse_planner(c, planner, cfg))) return st;
    const json_t *merged = json_object_get(lora, "merged");
    if (!json_is_boolean(merged))
        return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: lora.merged must be true or false", c->source);
    cfg->lora_merged = json_is_true(merged);
    if (!cfg->lora_merged) { /* the adapters kept apart: y = W x + (alpha / r) B (A x) */
        float alpha = 0;
        if ((st = get_uint(c, lora, "lora.", "r", 1, 1, 4096, &cfg->lora_rank)) ||
            (st = get_float(c, lora, "lora.", "alpha", &alpha)))
            return st;
        if (!(alpha > 0))
            return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: lora.alpha must be a positive number", c->source);
        cfg->lora_scale = alpha / (float)cfg->lora_rank;
    }
    if ((st = get_uint(c, root, "", "vision_tokens", 1, 1, 1u << 16, &cfg->n_vision_tokens))) return st;
    const json_t *ptext = json_object_get(prompt, "text"), *bos = json_object_get(prompt, "add_bos");
    if (!json_is_string(ptext) || json_string_length(ptext) > 65536)
        return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: prompt.text must be a string", c->source);
    snprintf(cfg->image_marker, sizeof cfg->image_marker, "<image>");
    snprintf(cfg->readout_token, sizeof cfg->readout_token, "<waypoint_ego>");
    if ((st = get_string(c, prompt, "prompt.", "image_marker", cfg->image_marker, sizeof cfg->image_marker)) ||
        (st = get_string(c, prompt, "prompt.", "readout_token", cfg->readout_token, sizeof cfg->readout_token)))
        return st;
    cfg->add_bos = !bos || json_is_true(bos);
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
    parse_ctx c = {source, err};
    json_error_t jerr;
    json_t *root = json_loadb(json_text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: not valid JSON (line %d: %s)", source, jerr.line, jerr.text);
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
