/*
 * Typed, range-checked fields of a converted driving model's config.json (jansson), with
 * messages naming the file and the field: shared by the Orion and MindDrive config parsers.
 */
#ifndef VH_FAMILY_DRIVING_CONFIG_FIELDS_H
#define VH_FAMILY_DRIVING_CONFIG_FIELDS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef struct vh_config_fields {
    const char *source;                /* the file, for messages */
    vh_error *err;
} vh_config_fields;

/* An integer in [lo, hi]; absent or null: *out keeps its default unless required.
 * `section` prefixes the key in messages ("text_config."). */
vh_status vh_config_uint(vh_config_fields *c, const json_t *obj, const char *section, const char *key, int required,
                         uint32_t lo, uint32_t hi, uint32_t *out);
/* A token id (-1 .. INT32_MAX); absent: default kept. */
vh_status vh_config_id(vh_config_fields *c, const json_t *obj, const char *section, const char *key, int32_t *out);
/* A finite number; absent: default kept. */
vh_status vh_config_float(vh_config_fields *c, const json_t *obj, const char *section, const char *key, float *out);
/* A string of at most size - 1 bytes; absent: default kept. */
vh_status vh_config_string(vh_config_fields *c, const json_t *obj, const char *section, const char *key, char *out,
                           size_t size);
/* The text parsed as JSON (duplicate keys refused), or NULL with VH_ERR_BAD_MODEL in err naming the
 * line. */
json_t *vh_config_load(const char *json_text, size_t len, const char *source, vh_error *err);
/* root[key], which must be an object (else *st is set). */
const json_t *vh_config_object(vh_config_fields *c, const json_t *root, const char *key, vh_status *st);

#endif
