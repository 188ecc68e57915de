#include "family/driving/driving_config.h"

#include <string.h>

#include "vlahybrid/backend.h"

vh_status vh_driving_llm_config_parse(vh_config_fields *c, const json_t *t, const char *s, float default_rope_theta,
                                      int default_tied, vh_driving_llm_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    vh_status st;
    const json_t *act = json_object_get(t, "hidden_act");
    if (act && (!json_is_string(act) || strcmp(json_string_value(act), "silu") != 0))
        return vh_error_set(c->err, VH_ERR_UNSUPPORTED, "%s: %shidden_act must be 'silu'", c->source, s);
    const json_t *tie = json_object_get(t, "tie_word_embeddings");
    if (tie && !json_is_boolean(tie))
        return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: %stie_word_embeddings must be true or false", c->source, s);
    cfg->tied = tie ? json_is_true(tie) : default_tied;
    cfg->rope_theta = default_rope_theta;
    cfg->rms_eps = 1e-6f;
    cfg->bos_id = 1;
    cfg->eos_id = 2;
    if ((st = vh_config_uint(c, t, s, "hidden_size", 1, 1, 1u << 16, &cfg->hidden)) ||
        (st = vh_config_uint(c, t, s, "intermediate_size", 1, 1, 1u << 18, &cfg->intermediate)) ||
        (st = vh_config_uint(c, t, s, "num_hidden_layers", 1, 1, 1024, &cfg->n_layers)) ||
        (st = vh_config_uint(c, t, s, "num_attention_heads", 1, 1, 1024, &cfg->n_heads)) ||
        (st = vh_config_uint(c, t, s, "vocab_size", 1, 1, 1u << 22, &cfg->vocab)) ||
        (st = vh_config_uint(c, t, s, "max_position_embeddings", 1, 1, 1u << 22, &cfg->max_positions)) ||
        (st = vh_config_float(c, t, s, "rms_norm_eps", &cfg->rms_eps)) ||
        (st = vh_config_float(c, t, s, "rope_theta", &cfg->rope_theta)) ||
        (st = vh_config_id(c, t, s, "bos_token_id", &cfg->bos_id)) ||
        (st = vh_config_id(c, t, s, "eos_token_id", &cfg->eos_id)))
        return st;
    cfg->n_kv_heads = cfg->n_heads;
    cfg->head_dim = cfg->hidden / cfg->n_heads;
    if ((st = vh_config_uint(c, t, s, "num_key_value_heads", 0, 1, 1024, &cfg->n_kv_heads)) ||
        (st = vh_config_uint(c, t, s, "head_dim", 0, 2, 1024, &cfg->head_dim)))
        return st;
    if (cfg->n_heads % cfg->n_kv_heads || cfg->head_dim % 2 || cfg->hidden % 4 || cfg->rms_eps <= 0 ||
        cfg->rope_theta <= 0)
        return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: %s: %u heads over %u KV heads of width %u, hidden %u, "
                            "rms_norm_eps %g, rope_theta %g do not make a decoder", c->source, s, cfg->n_heads,
                            cfg->n_kv_heads, cfg->head_dim, cfg->hidden, cfg->rms_eps, cfg->rope_theta);
    return VH_OK;
}

vh_status vh_driving_planner_config_parse(vh_config_fields *c, const json_t *p, const char *s, uint32_t feature_dim,
                                          vh_driving_planner_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    const json_t *type = json_object_get(p, "type");
    if (!json_is_string(type) || strcmp(json_string_value(type), "vae_gru") != 0)
        return vh_error_set(c->err, VH_ERR_UNSUPPORTED, "%s: %stype must be 'vae_gru' (the released agent's planner)",
                            c->source, s);
    cfg->min_log_sigma = -5.0f;
    cfg->max_log_sigma = 5.0f;
    vh_status st;
    if ((st = vh_config_uint(c, p, s, "latent_dim", 1, 1, 4096, &cfg->latent_dim)) ||
        (st = vh_config_uint(c, p, s, "ego_fut_mode", 1, 1, 64, &cfg->n_modes)) ||
        (st = vh_config_uint(c, p, s, "fut_ts", 1, 1, VH_MAX_TRAJECTORY_POINTS, &cfg->n_steps)) ||
        (st = vh_config_uint(c, p, s, "gru_layers", 1, 1, VH_PLAN_MAX_GRU_LAYERS, &cfg->gru_layers)) ||
        (st = vh_config_uint(c, p, s, "gru_hidden", 1, 1, 1u << 16, &cfg->gru_hidden)) ||
        (st = vh_config_float(c, p, s, "min_log_sigma", &cfg->min_log_sigma)) ||
        (st = vh_config_float(c, p, s, "max_log_sigma", &cfg->max_log_sigma)))
        return st;
    if (cfg->gru_layers * cfg->gru_hidden != feature_dim || cfg->min_log_sigma > cfg->max_log_sigma)
        return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: %s%u GRU layers of %u must split the LLM's hidden size %u "
                            "(the feature is the layers' initial states)", c->source, s, cfg->gru_layers,
                            cfg->gru_hidden, feature_dim);
    if ((uint64_t)cfg->n_modes * cfg->n_steps * 2 + 2ull * cfg->latent_dim > VH_MAX_ACTION_EXTRA_FLOATS)
        return vh_error_set(c->err, VH_ERR_UNSUPPORTED, "%s: %s%u modes of %u steps and a latent of %u do not fit an "
                            "action's extras", c->source, s, cfg->n_modes, cfg->n_steps, cfg->latent_dim);
    return VH_OK;
}
