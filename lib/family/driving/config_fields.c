#include "family/driving/config_fields.h"

#include <math.h>
#include <string.h>

vh_status vh_config_uint(vh_config_fields *c, const json_t *obj, const char *section, const char *key, int required,
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

vh_status vh_config_id(vh_config_fields *c, const json_t *obj, const char *section, const char *key, int32_t *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return VH_OK;
    if (!json_is_integer(v) || json_integer_value(v) < -1 || json_integer_value(v) > INT32_MAX)
        return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: %s%s must be an integer id", c->source, section, key);
    *out = (int32_t)json_integer_value(v);
    return VH_OK;
}

vh_status vh_config_float(vh_config_fields *c, const json_t *obj, const char *section, const char *key, float *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return VH_OK;
    if (!json_is_number(v) || !isfinite(json_number_value(v)))
        return vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: %s%s must be a number", c->source, section, key);
    *out = (float)json_number_value(v);
    return VH_OK;
}

vh_status vh_config_string(vh_config_fields *c, const json_t *obj, const char *section, const char *key, char *out,
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

json_t *vh_config_load(const char *json_text, size_t len, const char *source, vh_error *err)
{
    json_error_t jerr;
    json_t *root = json_loadb(json_text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) vh_error_set(err, VH_ERR_BAD_MODEL, "%s: not valid JSON (line %d: %s)", source, jerr.line, jerr.text);
    return root;
}

const json_t *vh_config_object(vh_config_fields *c, const json_t *root, const char *key, vh_status *st)
{
    const json_t *v = json_object_get(root, key);
    if (!json_is_object(v)) *st = vh_error_set(c->err, VH_ERR_BAD_MODEL, "%s: '%s' must be an object", c->source, key);
    return v;
}
