#include "family/openvla/openvla_config.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The vision towers OpenVLA checkpoints name, as timm builds them (timm/models/vision_transformer.py)
 * and as the published processor normalises their inputs (preprocessor_config.json of
 * openvla/openvla-7b: ImageNet's mean/std as they come out of a bf16 round trip; SigLIP's 0.5). */
typedef struct timm_tower_spec {
    const char *id;                    /* without the ".tag" suffix */
    uint32_t image_size, patch_size, embed_dim, depth, n_heads, mlp_hidden;
    uint32_t n_registers, class_token, layer_scale;
    float mean[3], std[3];
} timm_tower_spec;

#define DINOV2_MEAN {0.484375f, 0.455078125f, 0.40625f}
#define DINOV2_STD {0.228515625f, 0.2236328125f, 0.224609375f}
#define SIGLIP_MEAN {0.5f, 0.5f, 0.5f}
#define SIGLIP_STD {0.5f, 0.5f, 0.5f}

static const timm_tower_spec known_towers[] = {
    {"vit_large_patch14_reg4_dinov2", 224, 14, 1024, 24, 16, 4096, 4, 1, 1, DINOV2_MEAN, DINOV2_STD},
    {"vit_large_patch14_dinov2", 224, 14, 1024, 24, 16, 4096, 0, 1, 1, DINOV2_MEAN, DINOV2_STD},
    {"vit_so400m_patch14_siglip_224", 224, 14, 1152, 27, 16, 4304, 0, 0, 0, SIGLIP_MEAN, SIGLIP_STD},
    {"vit_so400m_patch14_siglip_384", 384, 14, 1152, 27, 16, 4304, 0, 0, 0, SIGLIP_MEAN, SIGLIP_STD},
};

/* transformers' LlamaConfig defaults, which text_config leaves out. */
enum {
    LLAMA_DEFAULT_VOCAB = 32000,
    LLAMA_DEFAULT_HIDDEN = 4096,
    LLAMA_DEFAULT_INTERMEDIATE = 11008,
    LLAMA_DEFAULT_LAYERS = 32,
    LLAMA_DEFAULT_HEADS = 32,
    LLAMA_DEFAULT_MAX_POSITIONS = 2048,
};
#define LLAMA_DEFAULT_RMS_EPS 1e-6
#define LLAMA_DEFAULT_ROPE_THETA 10000.0

/* Upper bounds that keep every later size computation far from overflow. */
#define MAX_DIM 65536u
#define MAX_DEPTH 1024u
#define MAX_VOCAB (1u << 22)
#define MAX_IMAGE 4096u

typedef struct parse_ctx {
    const char *source;
    vh_error *err;
} parse_ctx;

static vh_status bad(parse_ctx *c, const char *fmt, const char *field)
{
    char what[256];
    snprintf(what, sizeof what, fmt, field);
    return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: %s", c->source, what);
}

/* The file's JSON (duplicate keys refused), or VH_ERR_BAD_MODEL naming the line. */
static vh_status load_json(parse_ctx *c, const char *json_text, size_t len, json_t **root)
{
    json_error_t jerr;
    *root = json_loadb(json_text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (*root) return VH_OK;
    return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: not valid JSON (line %d: %s)", c->source, jerr.line,
                        jerr.text);
}

/* Optional unsigned integer field within [lo, hi]; keeps *out when absent or null. */
static vh_status get_uint(parse_ctx *c, const json_t *obj, const char *key, uint32_t lo, uint32_t hi,
                          uint32_t *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return VH_OK;
    if (!json_is_integer(v)) return bad(c, "'%s' must be an integer", key);
    json_int_t x = json_integer_value(v);
    if (x < (json_int_t)lo || x > (json_int_t)hi) {
        return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: '%s' = %lld is outside [%u, %u]",
                            c->source, key, (long long)x, lo, hi);
    }
    *out = (uint32_t)x;
    return VH_OK;
}

static vh_status get_int(parse_ctx *c, const json_t *obj, const char *key, int32_t *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return VH_OK;
    if (!json_is_integer(v)) return bad(c, "'%s' must be an integer", key);
    json_int_t x = json_integer_value(v);
    if (x < INT32_MIN || x > INT32_MAX) return bad(c, "'%s' is out of range", key);
    *out = (int32_t)x;
    return VH_OK;
}

/* Optional positive finite number. */
static vh_status get_positive(parse_ctx *c, const json_t *obj, const char *key, float *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return VH_OK;
    if (!json_is_number(v)) return bad(c, "'%s' must be a number", key);
    double x = json_number_value(v);
    if (!isfinite(x) || x <= 0 || x > 1e30) return bad(c, "'%s' must be a positive number", key);
    *out = (float)x;
    return VH_OK;
}

static vh_status get_bool(parse_ctx *c, const json_t *obj, const char *key, uint32_t *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return VH_OK;
    if (!json_is_boolean(v)) return bad(c, "'%s' must be true or false", key);
    *out = json_is_true(v) ? 1u : 0u;
    return VH_OK;
}

/* Optional string; *out keeps its value when absent. */
static vh_status get_string(parse_ctx *c, const json_t *obj, const char *key, const char **out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return VH_OK;
    if (!json_is_string(v)) return bad(c, "'%s' must be a string", key);
    *out = json_string_value(v);
    return VH_OK;
}

static const timm_tower_spec *find_tower_spec(const char *timm_id)
{
    size_t base_len = strcspn(timm_id, "."); /* "vit_...dinov2.lvd142m" -> "vit_...dinov2" */
    for (size_t i = 0; i < sizeof known_towers / sizeof known_towers[0]; i++) {
        if (strlen(known_towers[i].id) == base_len && !strncmp(known_towers[i].id, timm_id, base_len))
            return &known_towers[i];
    }
    return NULL;
}

static vh_status parse_towers(parse_ctx *c, const json_t *root, vh_openvla_config *cfg)
{
    const json_t *ids = json_object_get(root, "timm_model_ids");
    if (!json_is_array(ids) || json_array_size(ids) < 1 || json_array_size(ids) > VH_MAX_TOWERS)
        return bad(c, "'%s' must be a list of 1 or 2 timm model ids", "timm_model_ids");
    cfg->n_towers = (uint32_t)json_array_size(ids);

    uint32_t fused = cfg->n_towers == 2;
    vh_status st = get_bool(c, root, "use_fused_vision_backbone", &fused);
    if (st) return st;
    if (fused != (cfg->n_towers == 2))
        return bad(c, "'%s' disagrees with the number of timm_model_ids", "use_fused_vision_backbone");

    const json_t *sizes = json_object_get(root, "image_sizes");
    if (sizes && !json_is_null(sizes) && (!json_is_array(sizes) || json_array_size(sizes) != cfg->n_towers))
        return bad(c, "'%s' must list one size per timm model id", "image_sizes");

    const json_t *acts = json_object_get(root, "timm_override_act_layers");
    const json_t *overrides = json_object_get(root, "vision_backbone_overrides");
    if (overrides && !json_is_null(overrides) &&
        (!json_is_array(overrides) || json_array_size(overrides) != cfg->n_towers))
        return bad(c, "'%s' must be a list with one object per timm model id", "vision_backbone_overrides");

    for (uint32_t t = 0; t < cfg->n_towers; t++) {
        vh_vision_tower_config *tw = &cfg->towers[t];
        const json_t *id = json_array_get(ids, t);
        if (!json_is_string(id)) return bad(c, "'%s' entries must be strings", "timm_model_ids");
        const timm_tower_spec *spec = find_tower_spec(json_string_value(id));
        if (!spec) {
            return vh_error_set(c->err, VH_ERR_UNSUPPORTED,
                                "%s: vision tower '%s' is not supported (known: "
                                "vit_large_patch14_reg4_dinov2, vit_large_patch14_dinov2, "
                                "vit_so400m_patch14_siglip_224, vit_so400m_patch14_siglip_384)",
                                c->source, json_string_value(id));
        }
        snprintf(tw->timm_id, sizeof tw->timm_id, "%s", json_string_value(id));
        tw->image_size = spec->image_size;
        tw->patch_size = spec->patch_size;
        tw->embed_dim = spec->embed_dim;
        tw->depth = spec->depth;
        tw->n_heads = spec->n_heads;
        tw->mlp_hidden = spec->mlp_hidden;
        tw->n_registers = spec->n_registers;
        tw->class_token = spec->class_token;
        tw->layer_scale = spec->layer_scale;
        memcpy(tw->mean, spec->mean, sizeof tw->mean);
        memcpy(tw->std, spec->std, sizeof tw->std);

        if (json_is_array(sizes)) {
            const json_t *s = json_array_get(sizes, t);
            if (!json_is_integer(s) || json_integer_value(s) < 1 || json_integer_value(s) > MAX_IMAGE)
                return bad(c, "'%s' entries must be integers in [1, 4096]", "image_sizes");
            tw->image_size = (uint32_t)json_integer_value(s);
        }
        if (json_is_array(acts) && t < json_array_size(acts) && !json_is_null(json_array_get(acts, t))) {
            return vh_error_set(c->err, VH_ERR_UNSUPPORTED,
                                "%s: timm_override_act_layers[%u] is set; only the default (exact GELU) "
                                "activation is supported", c->source, t);
        }
        if (json_is_array(overrides)) {
            const json_t *o = json_array_get(overrides, t);
            if (!json_is_object(o)) return bad(c, "'%s' entries must be objects", "vision_backbone_overrides");
            if ((st = get_uint(c, o, "embed_dim", 1, MAX_DIM, &tw->embed_dim)) ||
                (st = get_uint(c, o, "depth", 2, MAX_DEPTH, &tw->depth)) ||
                (st = get_uint(c, o, "num_heads", 1, MAX_DIM, &tw->n_heads)) ||
                (st = get_uint(c, o, "mlp_hidden", 1, 4 * MAX_DIM, &tw->mlp_hidden)) ||
                (st = get_uint(c, o, "patch_size", 1, MAX_IMAGE, &tw->patch_size)) ||
                (st = get_uint(c, o, "image_size", 1, MAX_IMAGE, &tw->image_size)) ||
                (st = get_uint(c, o, "num_registers", 0, 256, &tw->n_registers)) ||
                (st = get_bool(c, o, "class_token", &tw->class_token)) ||
                (st = get_bool(c, o, "layer_scale", &tw->layer_scale)))
                return vh_error_prefix(c->err, "vision_backbone_overrides[%u]: ", t);
        }
        if (tw->embed_dim % tw->n_heads != 0) {
            return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: tower %u: embed_dim %u is not a multiple of "
                                "num_heads %u", c->source, t, tw->embed_dim, tw->n_heads);
        }
        if (tw->image_size % tw->patch_size != 0) {
            return vh_error_set(c->err, VH_ERR_UNSUPPORTED, "%s: tower %u: image_size %u is not a multiple "
                                "of patch_size %u", c->source, t, tw->image_size, tw->patch_size);
        }
    }
    if (cfg->n_towers == 2) {
        uint32_t g0 = cfg->towers[0].image_size / cfg->towers[0].patch_size;
        uint32_t g1 = cfg->towers[1].image_size / cfg->towers[1].patch_size;
        if (g0 != g1) {
            return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: the fused towers give %u and %u patches "
                                "per side; channel concatenation needs the same number", c->source, g0, g1);
        }
    }
    return VH_OK;
}

static vh_status parse_text_config(parse_ctx *c, const json_t *root, vh_openvla_config *cfg)
{
    cfg->vocab = LLAMA_DEFAULT_VOCAB;
    cfg->hidden = LLAMA_DEFAULT_HIDDEN;
    cfg->intermediate = LLAMA_DEFAULT_INTERMEDIATE;
    cfg->n_layers = LLAMA_DEFAULT_LAYERS;
    cfg->n_heads = LLAMA_DEFAULT_HEADS;
    cfg->n_kv_heads = 0; /* defaults to n_heads below */
    cfg->max_positions = LLAMA_DEFAULT_MAX_POSITIONS;
    cfg->rms_eps = (float)LLAMA_DEFAULT_RMS_EPS;
    cfg->rope_theta = (float)LLAMA_DEFAULT_ROPE_THETA;
    cfg->bos_id = 1;
    cfg->eos_id = 2;

    const json_t *tc = json_object_get(root, "text_config");
    if (!tc || json_is_null(tc)) return VH_OK; /* PrismaticConfig: LlamaConfig() defaults */
    if (!json_is_object(tc)) return bad(c, "'%s' must be an object", "text_config");

    const char *model_type = "llama", *act = "silu";
    vh_status st;
    if ((st = get_string(c, tc, "model_type", &model_type)) || (st = get_string(c, tc, "hidden_act", &act)))
        return st;
    if (strcmp(model_type, "llama") != 0)
        return vh_error_set(c->err, VH_ERR_UNSUPPORTED, "%s: text_config.model_type '%s' is not supported "
                            "(llama only)", c->source, model_type);
    if (strcmp(act, "silu") != 0)
        return vh_error_set(c->err, VH_ERR_UNSUPPORTED, "%s: text_config.hidden_act '%s' is not supported",
                            c->source, act);

    uint32_t head_dim = 0, attention_bias = 0, mlp_bias = 0;
    if ((st = get_uint(c, tc, "vocab_size", 1, MAX_VOCAB, &cfg->vocab)) ||
        (st = get_uint(c, tc, "hidden_size", 1, MAX_DIM, &cfg->hidden)) ||
        (st = get_uint(c, tc, "intermediate_size", 1, 4 * MAX_DIM, &cfg->intermediate)) ||
        (st = get_uint(c, tc, "num_hidden_layers", 1, MAX_DEPTH, &cfg->n_layers)) ||
        (st = get_uint(c, tc, "num_attention_heads", 1, MAX_DIM, &cfg->n_heads)) ||
        (st = get_uint(c, tc, "num_key_value_heads", 1, MAX_DIM, &cfg->n_kv_heads)) ||
        (st = get_uint(c, tc, "head_dim", 1, MAX_DIM, &head_dim)) ||
        (st = get_uint(c, tc, "max_position_embeddings", 1, 1u << 24, &cfg->max_positions)) ||
        (st = get_positive(c, tc, "rms_norm_eps", &cfg->rms_eps)) ||
        (st = get_positive(c, tc, "rope_theta", &cfg->rope_theta)) ||
        (st = get_bool(c, tc, "tie_word_embeddings", &cfg->tie_word_embeddings)) ||
        (st = get_bool(c, tc, "attention_bias", &attention_bias)) ||
        (st = get_bool(c, tc, "mlp_bias", &mlp_bias)) ||
        (st = get_int(c, tc, "bos_token_id", &cfg->bos_id)) ||
        (st = get_int(c, tc, "eos_token_id", &cfg->eos_id)))
        return vh_error_prefix(c->err, "text_config: ");

    const json_t *rope_scaling = json_object_get(tc, "rope_scaling");
    if (rope_scaling && !json_is_null(rope_scaling))
        return vh_error_set(c->err, VH_ERR_UNSUPPORTED, "%s: text_config.rope_scaling is not supported",
                            c->source);
    if (attention_bias || mlp_bias)
        return vh_error_set(c->err, VH_ERR_UNSUPPORTED, "%s: text_config attention_bias/mlp_bias are not "
                            "supported", c->source);
    if (cfg->n_kv_heads == 0) cfg->n_kv_heads = cfg->n_heads;
    if (cfg->n_heads % cfg->n_kv_heads != 0)
        return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: num_attention_heads %u is not a multiple of "
                            "num_key_value_heads %u", c->source, cfg->n_heads, cfg->n_kv_heads);
    if (head_dim == 0) {
        if (cfg->hidden % cfg->n_heads != 0)
            return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: hidden_size %u is not a multiple of "
                                "num_attention_heads %u", c->source, cfg->hidden, cfg->n_heads);
        head_dim = cfg->hidden / cfg->n_heads;
    }
    if (head_dim % 2 != 0)
        return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: head_dim %u must be even for RoPE", c->source,
                            head_dim);
    cfg->head_dim = head_dim;
    return VH_OK;
}

/* One list of action_dim finite numbers. */
static vh_status parse_stat_list(parse_ctx *c, const json_t *action, const char *key, const char *dataset,
                                 uint32_t *dim, double *out)
{
    const json_t *list = json_object_get(action, key);
    if (!json_is_array(list) || json_array_size(list) == 0 || json_array_size(list) > VH_MAX_ACTION_DIM) {
        return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: norm_stats['%s'].action.%s must be a list of "
                            "1..%d numbers", c->source, dataset, key, VH_MAX_ACTION_DIM);
    }
    if (*dim && json_array_size(list) != *dim) {
        return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: norm_stats['%s'].action.%s has %zu values, "
                            "expected %u", c->source, dataset, key, json_array_size(list), *dim);
    }
    *dim = (uint32_t)json_array_size(list);
    for (uint32_t i = 0; i < *dim; i++) {
        const json_t *v = json_array_get(list, i);
        if (!json_is_number(v) || !isfinite(json_number_value(v))) {
            return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: norm_stats['%s'].action.%s[%u] is not a "
                                "finite number", c->source, dataset, key, i);
        }
        out[i] = json_number_value(v);
    }
    return VH_OK;
}

/* The datasets of a norm_stats-shaped map ({dataset: {"action": {"q01", "q99", "mask"}, ...}}),
 * added to cfg; a dataset already there (from config.json) is replaced by this map's. */
static vh_status parse_dataset_map(parse_ctx *c, const json_t *ns, vh_openvla_config *cfg)
{
    const char *key;
    const json_t *entry;
    json_object_foreach((json_t *)ns, key, entry) {
        vh_action_stats *ds = NULL;
        for (uint32_t i = 0; i < cfg->n_datasets && !ds; i++)
            if (!strcmp(cfg->datasets[i].dataset, key)) ds = &cfg->datasets[i];
        if (!ds) {
            if (cfg->n_datasets >= VH_MAX_DATASETS) return bad(c, "'%s' has too many datasets", "norm_stats");
            vh_action_stats *grown = realloc(cfg->datasets, (cfg->n_datasets + 1) * sizeof *grown);
            if (!grown) return vh_error_set(c->err, VH_ERR_OUT_OF_MEMORY, "out of memory");
            cfg->datasets = grown;
            ds = &cfg->datasets[cfg->n_datasets];
            memset(ds, 0, sizeof *ds);
            ds->dataset = strdup(key);
            if (!ds->dataset) return vh_error_set(c->err, VH_ERR_OUT_OF_MEMORY, "out of memory");
            cfg->n_datasets++;
        } else {
            char *name = ds->dataset;
            memset(ds, 0, sizeof *ds);
            ds->dataset = name;
        }
        const json_t *action = json_is_object(entry) ? json_object_get(entry, "action") : NULL;
        if (!json_is_object(action)) {
            return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: norm_stats['%s'] has no 'action' object",
                                c->source, key);
        }
        vh_status st;
        if ((st = parse_stat_list(c, action, "q01", key, &ds->dim, ds->q01)) ||
            (st = parse_stat_list(c, action, "q99", key, &ds->dim, ds->q99)))
            return st;
        const json_t *mask = json_object_get(action, "mask");
        for (uint32_t i = 0; i < ds->dim; i++) ds->mask[i] = 1; /* predict_action: default all true */
        if (mask && !json_is_null(mask)) {
            if (!json_is_array(mask) || json_array_size(mask) != ds->dim) {
                return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: norm_stats['%s'].action.mask must list %u "
                                    "booleans", c->source, key, ds->dim);
            }
            for (uint32_t i = 0; i < ds->dim; i++) {
                const json_t *m = json_array_get(mask, i);
                if (!json_is_boolean(m)) {
                    return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: norm_stats['%s'].action.mask[%u] is "
                                        "not a boolean", c->source, key, i);
                }
                ds->mask[i] = json_is_true(m) ? 1 : 0;
            }
        }
    }
    return VH_OK;
}

/* config.json's norm_stats: optional here, since a fine-tune may ship them in
 * dataset_statistics.json instead (vh_openvla_config_check_datasets requires one of the two). */
static vh_status parse_norm_stats(parse_ctx *c, const json_t *root, vh_openvla_config *cfg)
{
    const json_t *ns = json_object_get(root, "norm_stats");
    if (!ns || json_is_null(ns)) return VH_OK;
    if (!json_is_object(ns) || json_object_size(ns) == 0)
        return bad(c, "'%s' must be an object with at least one dataset (an OpenVLA checkpoint)", "norm_stats");
    if (json_object_size(ns) > VH_MAX_DATASETS) return bad(c, "'%s' has too many datasets", "norm_stats");
    return parse_dataset_map(c, ns, cfg);
}

static vh_status parse_root(parse_ctx *c, const json_t *root, vh_openvla_config *cfg)
{
    if (!json_is_object(root)) return bad(c, "%s is not a JSON object", "the file");

    const char *model_type = NULL, *arch = "gelu-mlp", *resize = "letterbox";
    vh_status st;
    if ((st = get_string(c, root, "model_type", &model_type))) return st;
    if (!model_type || strcmp(model_type, "openvla") != 0) {
        return vh_error_set(c->err, VH_ERR_UNSUPPORTED, "%s: model_type is '%s'; only 'openvla' checkpoints "
                            "are supported", c->source, model_type ? model_type : "(missing)");
    }
    if ((st = parse_towers(c, root, cfg))) return st;

    /* PrismaticConfig's defaults: arch_specifier "gelu-mlp", image_resize_strategy "letterbox". */
    if ((st = get_string(c, root, "arch_specifier", &arch)) ||
        (st = get_string(c, root, "image_resize_strategy", &resize)))
        return st;
    /* The projector follows use_fused_vision_backbone (PrismaticProjector), whatever the specifier's
     * wording; the specifier must still name an MLP projector of that kind. */
    uint32_t want_fused = cfg->n_towers == 2;
    int arch_fused = strstr(arch, "fused-gelu-mlp") != NULL;
    int arch_gelu = !arch_fused && strstr(arch, "gelu-mlp") != NULL;
    if ((want_fused && !arch_fused) || (!want_fused && !arch_gelu)) {
        return vh_error_set(c->err, VH_ERR_UNSUPPORTED, "%s: arch_specifier '%s' with %u vision tower(s) is "
                            "not supported (expected '...fused-gelu-mlp' for 2, '...gelu-mlp' for 1)",
                            c->source, arch, cfg->n_towers);
    }
    cfg->projector_layers = want_fused ? 3 : 2;

    if (strcmp(resize, "resize-naive") != 0) {
        return vh_error_set(c->err, VH_ERR_UNSUPPORTED, "%s: image_resize_strategy '%s' is not supported "
                            "(resize-naive only)", c->source, resize);
    }
    snprintf(cfg->resize_strategy, sizeof cfg->resize_strategy, "%s", resize);

    if ((st = parse_text_config(c, root, cfg))) return st;

    uint32_t pad_multiple = 64;
    cfg->n_action_bins = 256;
    if ((st = get_uint(c, root, "pad_to_multiple_of", 0, MAX_VOCAB, &pad_multiple)) ||
        (st = get_uint(c, root, "n_action_bins", 2, 1u << 16, &cfg->n_action_bins)))
        return st;
    /* OpenVLAForActionPrediction: vocab_size = text_config.vocab_size - pad_to_multiple_of */
    if (pad_multiple >= cfg->vocab || cfg->vocab - pad_multiple < cfg->n_action_bins) {
        return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: text_config.vocab_size %u minus pad_to_multiple_of "
                            "%u leaves no room for %u action bins", c->source, cfg->vocab, pad_multiple,
                            cfg->n_action_bins);
    }
    cfg->vocab_unpadded = cfg->vocab - pad_multiple;
    return parse_norm_stats(c, root, cfg);
}

vh_status vh_openvla_config_parse(const char *json_text, size_t len, const char *source,
                                  vh_openvla_config *cfg, vh_error *err)
{
    memset(cfg, 0, sizeof *cfg);
    parse_ctx c = {source, err};
    json_t *root;
    vh_status loaded = load_json(&c, json_text, len, &root);
    if (loaded) return loaded;
    vh_status st = parse_root(&c, root, cfg);
    json_decref(root);
    if (st) vh_openvla_config_free(cfg);
    return st;
}

/* One list of `n` lists of 3 positive numbers. */
static vh_status parse_triplets(parse_ctx *c, const json_t *list, uint32_t n, const char *key, int positive,
                                float out[][3])
{
    if (!json_is_array(list) || json_array_size(list) != n)
        return bad(c, "'%s' must have one entry per vision tower", key);
    for (uint32_t t = 0; t < n; t++) {
        const json_t *trip = json_array_get(list, t);
        if (!json_is_array(trip) || json_array_size(trip) != 3) return bad(c, "'%s' entries must list 3 numbers", key);
        for (uint32_t i = 0; i < 3; i++) {
            const json_t *v = json_array_get(trip, i);
            double x = json_is_number(v) ? json_number_value(v) : NAN;
            if (!isfinite(x) || (positive && x <= 0)) return bad(c, "'%s' has an invalid value", key);
            out[t][i] = (float)x;
        }
    }
    return VH_OK;
}

vh_status vh_openvla_config_apply_preprocessor(vh_openvla_config *cfg, const char *json_text, size_t len,
                                               const char *source, vh_error *err)
{
    parse_ctx c = {source, err};
    json_t *root;
    vh_status loaded = load_json(&c, json_text, len, &root);
    if (loaded) return loaded;
    vh_status st = VH_OK;
    float means[VH_MAX_TOWERS][3], stds[VH_MAX_TOWERS][3];
    const char *resize = NULL;
    const json_t *v;
    if (!json_is_object(root)) {
        st = bad(&c, "%s is not a JSON object", "the file");
        goto done;
    }
    if ((st = get_string(&c, root, "image_resize_strategy", &resize))) goto done;
    if (resize && strcmp(resize, cfg->resize_strategy) != 0) {
        st = vh_error_set(err, VH_ERR_BAD_MODEL, "%s: image_resize_strategy '%s' disagrees with config.json's "
                          "'%s'", source, resize, cfg->resize_strategy);
        goto done;
    }
    if ((v = json_object_get(root, "interpolations")) && !json_is_null(v)) {
        for (size_t i = 0; i < json_array_size(v); i++) {
            const json_t *s = json_array_get(v, i);
            if (!json_is_string(s) || strcmp(json_string_value(s), "bicubic") != 0) {
                st = vh_error_set(err, VH_ERR_UNSUPPORTED, "%s: interpolations[%zu] is not 'bicubic'", source, i);
                goto done;
            }
        }
    }
    if ((v = json_object_get(root, "input_sizes")) && !json_is_null(v)) {
        if (!json_is_array(v) || json_array_size(v) != cfg->n_towers) {
            st = bad(&c, "'%s' must have one entry per vision tower", "input_sizes");
            goto done;
        }
        for (uint32_t t = 0; t < cfg->n_towers; t++) {
            const json_t *s = json_array_get(v, t);
            uint32_t sz = cfg->towers[t].image_size;
            if (!json_is_array(s) || json_array_size(s) != 3 || json_integer_value(json_array_get(s, 0)) != 3 ||
                json_integer_value(json_array_get(s, 1)) != sz || json_integer_value(json_array_get(s, 2)) != sz) {
                st = vh_error_set(err, VH_ERR_BAD_MODEL, "%s: input_sizes[%u] is not [3, %u, %u] as config.json "
                                  "implies", source, t, sz, sz);
                goto done;
            }
        }
    }
    if ((v = json_object_get(root, "means")) && !json_is_null(v)) {
        if ((st = parse_triplets(&c, v, cfg->n_towers, "means", 0, means))) goto done;
        for (uint32_t t = 0; t < cfg->n_towers; t++) memcpy(cfg->towers[t].mean, means[t], sizeof means[t]);
    }
    if ((v = json_object_get(root, "stds")) && !json_is_null(v)) {
        if ((st = parse_triplets(&c, v, cfg->n_towers, "stds", 1, stds))) goto done;
        for (uint32_t t = 0; t < cfg->n_towers; t++) memcpy(cfg->towers[t].std, stds[t], sizeof stds[t]);
    }
done:
    json_decref(root);
    return st;
}

vh_status vh_openvla_config_apply_dataset_statistics(vh_openvla_config *cfg, const char *json_text, size_t len,
                                                     const char *source, vh_error *err)
{
    parse_ctx c = {source, err};
    json_t *root;
    vh_status loaded = load_json(&c, json_text, len, &root);
    if (loaded) return loaded;
    vh_status st;
    if (!json_is_object(root) || json_object_size(root) == 0)
        st = bad(&c, "%s must be an object with at least one dataset", "the file");
    else if (json_object_size(root) > VH_MAX_DATASETS)
        st = bad(&c, "%s has too many datasets", "the file");
    else
        st = parse_dataset_map(&c, root, cfg);
    json_decref(root);
    return st;
}

vh_status vh_openvla_config_check_datasets(const vh_openvla_config *cfg, const char *dir, vh_error *err)
{
    if (cfg->n_datasets > 0) return VH_OK;
    return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: no action statistics: config.json has no norm_stats and "
                        "there is no dataset_statistics.json (an OpenVLA checkpoint has one of them)", dir);
}

vh_status vh_openvla_config_dataset(const vh_openvla_config *cfg, const char *key,
                                    const vh_action_stats **stats, vh_error *err)
{
    if (!key || !*key) {
        if (cfg->n_datasets == 1) {
            *stats = &cfg->datasets[0];
            return VH_OK;
        }
    } else {
        for (uint32_t i = 0; i < cfg->n_datasets; i++) {
            if (!strcmp(cfg->datasets[i].dataset, key)) {
                *stats = &cfg->datasets[i];
                return VH_OK;
            }
        }
    }
    char keys[384] = "";
    size_t used = 0;
    for (uint32_t i = 0; i < cfg->n_datasets && used + 4 < sizeof keys; i++) {
        int n = snprintf(keys + used, sizeof keys - used, "%s%s", i ? ", " : "", cfg->datasets[i].dataset);
        if (n < 0) break;
        used += (size_t)n < sizeof keys - used ? (size_t)n : sizeof keys - used - 1;
    }
    if (!key || !*key) {
        return vh_error_set(err, VH_ERR_UNNORM_KEY, "the model was trained on %u datasets: set unnorm_key to "
                            "one of: %s", cfg->n_datasets, keys);
    }
    return vh_error_set(err, VH_ERR_UNNORM_KEY, "unnorm_key '%s' is not in norm_stats; choose one of: %s", key,
                        keys);
}

void vh_openvla_config_free(vh_openvla_config *cfg)
{
    if (!cfg) return;
    for (uint32_t i = 0; i < cfg->n_datasets; i++) free(cfg->datasets[i].dataset);
    free(cfg->datasets);
    cfg->datasets = NULL;
    cfg->n_datasets = 0;
}
