#include "text/hf_normalizer.h"

#include <stdlib.h>
#include <string.h>

#include "text/bpe_tokenizer.h"
#include "text/unicode_nfc.h"

static char *copy_bytes(const char *s, size_t n)
{
    char *c = malloc(n + 1);
    if (c) {
        if (n) memcpy(c, s, n);
        c[n] = 0;
    }
    return c;
}

static vh_status add_step(vh_hf_normalizer *n, vh_hf_normalizer_step step, const char *name,
                          vh_error *err)
{
    vh_hf_normalizer_step *steps = realloc(n->steps, (n->n_steps + 1) * sizeof *steps);
    if (!steps) {
        free(step.text);
        free(step.content);
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
    }
    n->steps = steps;
    n->steps[n->n_steps++] = step;
    return VH_OK;
}

static vh_status read_spec(const json_t *spec, const char *name, vh_hf_normalizer *n,
                           vh_error *err)
{
    if (!json_is_object(spec))
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: a normalizer is not an object", name);
    const json_t *type = json_object_get(spec, "type");
    if (!json_is_string(type))
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: a normalizer has no \"type\"", name);
    const char *t = json_string_value(type);
    if (strcmp(t, "Sequence") == 0) {
        const json_t *list = json_object_get(spec, "normalizers");
        if (!json_is_array(list))
            return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: normalizer Sequence has no "
                                "\"normalizers\" array", name);
        for (size_t i = 0; i < json_array_size(list); i++) {
            vh_status st = read_spec(json_array_get(list, i), name, n, err);
            if (st) return st;
        }
        return VH_OK;
    }
    if (strcmp(t, "NFC") == 0)
        return add_step(n, (vh_hf_normalizer_step){.kind = VH_HF_NORMALIZER_NFC}, name, err);
    if (strcmp(t, "Prepend") == 0) {
        const json_t *prepend = json_object_get(spec, "prepend");
        if (!json_is_string(prepend))
            return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: normalizer Prepend has no \"prepend\" "
                                "string", name);
        char *text = copy_bytes(json_string_value(prepend), json_string_length(prepend));
        if (!text) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
        return add_step(n, (vh_hf_normalizer_step){VH_HF_NORMALIZER_PREPEND, text,
                                                   json_string_length(prepend), NULL, 0},
                        name, err);
    }
    if (strcmp(t, "Replace") == 0) {
        const json_t *pattern = json_object_get(spec, "pattern");
        const json_t *content = json_object_get(spec, "content");
        const json_t *string = json_object_get(pattern, "String");
        if (json_is_object(pattern) && json_object_get(pattern, "Regex"))
            return vh_error_set(err, VH_ERR_UNSUPPORTED, "%s: normalizer Replace with a Regex "
                                "pattern is not supported (only String patterns)", name);
        if (!json_is_string(string) || !json_is_string(content))
            return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: normalizer Replace needs "
                                "\"pattern\": {\"String\": ...} and a \"content\" string", name);
        if (json_string_length(string) == 0)
            return vh_error_set(err, VH_ERR_UNSUPPORTED, "%s: normalizer Replace with an empty "
                                "pattern is not supported", name);
        char *p = copy_bytes(json_string_value(string), json_string_length(string));
        char *c = copy_bytes(json_string_value(content), json_string_length(content));
        return add_step(n, (vh_hf_normalizer_step){VH_HF_NORMALIZER_REPLACE, p,
                                                   json_string_length(string), c,
                                                   json_string_length(content)},
                        name, err);
    }
    return vh_error_set(err, VH_ERR_UNSUPPORTED, "%s: normalizer type \"%.64s\" is not supported "
                        "(supported: Sequence, Prepend, Replace, NFC)", name, t);
}

vh_status vh_hf_normalizer_from_json(const json_t *spec, const char *name, vh_hf_normalizer *out,
                                     vh_error *err)
{
    memset(out, 0, sizeof *out);
    if (!spec || json_is_null(spec)) return VH_OK;
    vh_status st = read_spec(spec, name, out, err);
    if (st == VH_OK)
        for (size_t i = 0; i < out->n_steps; i++)
            if (!out->steps[i].text && out->steps[i].kind != VH_HF_NORMALIZER_NFC)
                st = vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
    if (st == VH_OK)
        for (size_t i = 0; i < out->n_steps; i++)
            if (out->steps[i].kind == VH_HF_NORMALIZER_REPLACE && !out->steps[i].content)
                st = vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
    if (st) vh_hf_normalizer_release(out);
    return st;
}

void vh_hf_normalizer_release(vh_hf_normalizer *n)
{
    for (size_t i = 0; i < n->n_steps; i++) {
        free(n->steps[i].text);
        free(n->steps[i].content);
    }
    free(n->steps);
    memset(n, 0, sizeof *n);
}

/* One step from text[0 .. size) into a new buffer. */
static vh_status apply_step(const vh_hf_normalizer_step *s, const uint8_t *text, size_t size,
                            uint8_t **out, size_t *out_size, vh_error *err)
{
    if (s->kind == VH_HF_NORMALIZER_NFC) return vh_unicode_nfc(text, size, out, out_size, err);
    size_t count = 0, total;
    if (s->kind == VH_HF_NORMALIZER_PREPEND) {
        total = size ? size + s->text_size : 0;
    } else {
        for (size_t i = 0; i + s->text_size <= size;)
            if (memcmp(text + i, s->text, s->text_size) == 0) count++, i += s->text_size;
            else i++;
        total = size - count * s->text_size + count * s->content_size;
    }
    if (total > VH_TOKENIZER_MAX_TEXT_BYTES)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "tokenizer.json: the normalized text "
                            "would be %zu bytes, more than the %zu allowed", total,
                            VH_TOKENIZER_MAX_TEXT_BYTES);
    uint8_t *o = malloc(total + 1);
    if (!o) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "tokenizer.json: out of memory");
    size_t w = 0;
    if (s->kind == VH_HF_NORMALIZER_PREPEND) {
        if (size) {
            memcpy(o, s->text, s->text_size);
            memcpy(o + s->text_size, text, size);
            w = total;
        }
    } else {
        for (size_t i = 0; i < size;) {
            if (i + s->text_size <= size && memcmp(text + i, s->text, s->text_size) == 0) {
                if (s->content_size) memcpy(o + w, s->content, s->content_size);
                w += s->content_size;
                i += s->text_size;
            } else {
                o[w++] = text[i++];
            }
        }
    }
    o[w] = 0;
    *out = o;
    *out_size = w;
    return VH_OK;
}

vh_status vh_hf_normalizer_apply(const vh_hf_normalizer *n, const uint8_t *text, size_t size,
                                 uint8_t **out, size_t *out_size, vh_error *err)
{
    uint8_t *current = malloc(size + 1);
    if (!current) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "tokenizer.json: out of memory");
    if (size) memcpy(current, text, size);
    current[size] = 0;
    size_t current_size = size;
    for (size_t i = 0; i < n->n_steps; i++) {
        uint8_t *next;
        size_t next_size;
        vh_status st = apply_step(&n->steps[i], current, current_size, &next, &next_size, err);
        free(current);
        if (st) return st;
        current = next;
        current_size = next_size;
    }
    *out = current;
    *out_size = current_size;
    return VH_OK;
}
