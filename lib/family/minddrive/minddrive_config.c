#include "family/minddrive/minddrive_config.h"

#include <stdlib.h>
#include <string.h>

static vh_status parse_lora(vh_config_fields *c, const json_t *lora, vh_minddrive_config *cfg)
{
    const json_t *merged = json_object_get(lora, "merged"), *experts = json_object_get(lora, "experts");
    if (!json_is_false(merged))
        return vh_error_set(c->err, VH_ERR_UNSUPPORTED, "%s: lora.merged must be false: this version runs the two "
                            "experts as LoRA sets on one base (convert with --lora keep)", c->source);
    float alpha = 0;
    vh_status st;
    if ((st = vh_config_uint(c, lora, "lora.", "r", 1, 1, 4096, &cfg->lora_rank)) ||
        (st = vh_config_float(c, lora, "lora.", "alpha", &alpha)))
        return st;
    if (!(alpha > 0)) return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: lora.alpha must be a positive number", c->source);
    cfg->lora_scale = alpha / (float)cfg->lora_rank;
    if (!json_is_array(experts) || json_array_size(experts) != 2)
        return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: lora.experts must name the two adapters", c->source);
    for (size_t i = 0; i < 2; i++) {
        const json_t *e = json_array_get(experts, i);
        if (!json_is_string(e) || !json_string_length(e) || json_string_length(e) >= sizeof cfg->experts[0] ||
            strchr(json_string_value(e), '/'))
            return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: lora.experts[%zu] must be an adapter name", c->source, i);
        snprintf(cfg->experts[i], sizeof cfg->experts[i], "%s", json_string_value(e));
    }
    if (!strcmp(cfg->experts[0], cfg->experts[1]))
        return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: lora.experts names one adapter twice", c->source);
    return VH_OK;
}

static vh_status parse_round(vh_config_fields *c, const json_t *prompt, const char *key, const vh_minddrive_config *cfg,
                             vh_minddrive_round *r)
{
    const json_t *o = json_object_get(prompt, key);
    const json_t *text = json_object_get(o, "text"), *expert = json_object_get(o, "expert");
    if (!json_is_string(text) || json_string_length(text) > 65536 || !json_is_string(expert))
        return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: prompt.%s must have a text and an expert", c->source, key);
    r->lora_set = 2;
    for (uint32_t i = 0; i < 2; i++)
        if (!strcmp(json_string_value(expert), cfg->experts[i])) r->lora_set = i;
    if (r->lora_set == 2)
        return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: prompt.%s.expert '%s' is not one of lora.experts", c->source,
                            key, json_string_value(expert));
    if (!(r->text = strdup(json_string_value(text)))) return vh_error_set(c->err, VH_ERR_OUT_OF_MEMORY, "out of memory");
    if (!strstr(r->text, cfg->image_marker))
        return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: prompt.%s.text lacks the image marker '%s'", c->source, key,
                            cfg->image_marker);
    return VH_OK;
}

static vh_status parse_tokens(vh_config_fields *c, const json_t *root, vh_minddrive_config *cfg)
{
    const json_t *speeds = json_object_get(root, "speed_tokens"), *paths = json_object_get(root, "path_mode_of_command");
    if (!json_is_array(speeds) || json_array_size(speeds) != cfg->speed.n_modes ||
        json_array_size(speeds) > VH_MINDDRIVE_MAX_SPEEDS)
        return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: speed_tokens must list the speed planner's %u modes' tokens",
                            c->source, cfg->speed.n_modes);
    cfg->n_speeds = (uint32_t)json_array_size(speeds);
    for (uint32_t i = 0; i < cfg->n_speeds; i++) {
        const json_t *t = json_array_get(speeds, i);
        if (!json_is_string(t) || !json_string_length(t) || json_string_length(t) >= sizeof cfg->speed_tokens[0])
            return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: speed_tokens[%u] must be a token", c->source, i);
        snprintf(cfg->speed_tokens[i], sizeof cfg->speed_tokens[i], "%s", json_string_value(t));
    }
    if (!json_is_array(paths) || json_array_size(paths) != VH_MINDDRIVE_COMMANDS)
        return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: path_mode_of_command must map the %d commands", c->source,
                            VH_MINDDRIVE_COMMANDS);
    for (uint32_t i = 0; i < VH_MINDDRIVE_COMMANDS; i++) {
        const json_t *m = json_array_get(paths, i);
        if (!json_is_integer(m) || json_integer_value(m) < 0 || json_integer_value(m) >= (json_int_t)cfg->path.n_modes)
            return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: path_mode_of_command[%u] must be a path mode 0..%u",
                                c->source, i, cfg->path.n_modes - 1);
        cfg->path_mode_of_command[i] = (uint32_t)json_integer_value(m);
    }
    return VH_OK;
}

static vh_status parse_root(vh_config_fields *c, const json_t *root, vh_minddrive_config *cfg)
{
    vh_status st = VH_OK;
    const json_t *text = vh_config_object(c, root, "text_config", &st), *lora = NULL, *planners = NULL, *prompt = NULL;
    const json_t *speed = NULL, *path = NULL;
    if (!st) lora = vh_config_object(c, root, "lora", &st);
    if (!st) planners = vh_config_object(c, root, "planners", &st);
    if (!st) speed = vh_config_object(c, planners, "speed", &st);
    if (!st) path = vh_config_object(c, planners, "path", &st);
    if (!st) prompt = vh_config_object(c, root, "prompt", &st);
    if (st || (st = vh_driving_llm_config_parse(c, text, "text_config.", 1e6f, 1, &cfg->llm))) return st;
    if (!cfg->llm.tied)
        return vh_error_set(c->err, VH_ERR_UNSUPPORTED, "%s: text_config.tie_word_embeddings is false; MindDrive's "
                            "Qwen2 reads its decision through the tied embedding", c->source);
    if ((st = vh_driving_planner_config_parse(c, speed, "planners.speed.", cfg->llm.hidden, &cfg->speed)) ||
        (st = vh_driving_planner_config_parse(c, path, "planners.path.", cfg->llm.hidden, &cfg->path)) ||
        (st = parse_lora(c, lora, cfg)))
        return st;
    snprintf(cfg->speed_feature, sizeof cfg->speed_feature, "<waypoint_ego>");
    snprintf(cfg->path_feature, sizeof cfg->path_feature, "<path_waypoint_ego>");
    snprintf(cfg->image_marker, sizeof cfg->image_marker, "<image>");
    if ((st = vh_config_string(c, speed, "planners.speed.", "feature_token", cfg->speed_feature,
                               sizeof cfg->speed_feature)) ||
        (st = vh_config_string(c, path, "planners.path.", "feature_token", cfg->path_feature, sizeof cfg->path_feature)) ||
        (st = vh_config_string(c, prompt, "prompt.", "image_marker", cfg->image_marker, sizeof cfg->image_marker)) ||
        (st = vh_config_uint(c, root, "", "vision_tokens", 1, 1, 1u << 16, &cfg->n_vision_tokens)) ||
        (st = parse_round(c, prompt, "decision", cfg, &cfg->decision)) ||
        (st = parse_round(c, prompt, "action", cfg, &cfg->action)) || (st = parse_tokens(c, root, cfg)) ||
        (st = vh_front_end_config_parse(c, root, &cfg->front_end)))
        return st;
    if ((uint64_t)cfg->speed.n_modes * cfg->speed.n_steps * 2 + (uint64_t)cfg->path.n_modes * cfg->path.n_steps * 2 +
            4ull * cfg->speed.latent_dim + 4ull * cfg->path.latent_dim + cfg->n_speeds + 2ull * cfg->speed.n_steps >
        VH_MAX_ACTION_EXTRA_FLOATS)
        return vh_error_set(c->err, VH_ERR_UNSUPPORTED, "%s: the two planners' modes and latents do not fit an action's "
                            "%d extra floats", c->source, VH_MAX_ACTION_EXTRA_FLOATS);
    return VH_OK;
}

vh_status vh_minddrive_config_parse(const char *json_text, size_t len, const char *source, vh_minddrive_config *cfg,
                                    vh_error *err)
{
    memset(cfg, 0, sizeof *cfg);
    vh_config_fields c = {source, err};
    json_t *root = vh_config_load(json_text, len, source, err);
    if (!root) return VH_ERR_BAD_MODEL;
    vh_status st = parse_root(&c, root, cfg);
    json_decref(root);
    if (st) vh_minddrive_config_free(cfg);
    return st;
}

void vh_minddrive_config_free(vh_minddrive_config *cfg)
{
    free(cfg->decision.text);
    free(cfg->action.text);
    memset(cfg, 0, sizeof *cfg);
}
