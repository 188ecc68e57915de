/* tokenizer.json (Hugging Face tokenizers' serialization) -> vh_hf_tokenizer: the top level, the
 * post_processor, and the checks between components; each component reads its own part. */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "text/hf_tokenizer.h"
#include "util/file_read.h"

/* Append the ids of special token `name` of a TemplateProcessing to *ids. */
static vh_status template_special(const json_t *specials, const char *token, int32_t **ids,
                                  size_t *n, const char *name, vh_error *err)
{
    const json_t *list = json_object_get(json_object_get(specials, token), "ids");
    if (!json_is_array(list))
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: post_processor special token \"%.64s\" has "
                            "no \"ids\" in special_tokens", name, token);
    size_t count = json_array_size(list);
    if (count > 1024)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: post_processor special token \"%.64s\" has "
                            "%zu ids", name, token, count);
    int32_t *grown = realloc(*ids, (*n + count + 1) * sizeof *grown);
    if (!grown) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
    *ids = grown;
    for (size_t i = 0; i < count; i++) {
        const json_t *id = json_array_get(list, i);
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= INT32_MAX)
            return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: post_processor special token \"%.64s\": "
                                "an id is not an integer 0 .. 2^31-2", name, token);
        (*ids)[(*n)++] = (int32_t)json_integer_value(id);
    }
    return VH_OK;
}

/* TemplateProcessing's "single" template: special tokens, $A, special tokens. */
static vh_status read_template(vh_hf_tokenizer *tok, const json_t *spec, const char *name,
                               vh_error *err)
{
    const json_t *single = json_object_get(spec, "single");
    const json_t *specials = json_object_get(spec, "special_tokens");
    if (!json_is_array(single) || !json_is_object(specials))
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: TemplateProcessing needs a \"single\" array "
                            "and a \"special_tokens\" object", name);
    if (tok->n_before || tok->n_after)
        return vh_error_set(err, VH_ERR_UNSUPPORTED, "%s: more than one TemplateProcessing", name);
    bool seen_sequence = false;
    for (size_t i = 0; i < json_array_size(single); i++) {
        const json_t *piece = json_array_get(single, i);
        const json_t *special = json_object_get(piece, "SpecialToken");
        const json_t *sequence = json_object_get(piece, "Sequence");
        vh_status st = VH_OK;
        if (json_is_string(json_object_get(special, "id"))) {
            const char *token = json_string_value(json_object_get(special, "id"));
            st = seen_sequence
                     ? template_special(specials, token, &tok->template_after, &tok->n_after, name,
                                        err)
                     : template_special(specials, token, &tok->template_before, &tok->n_before,
                                        name, err);
        } else if (json_is_string(json_object_get(sequence, "id")) &&
                   strcmp(json_string_value(json_object_get(sequence, "id")), "A") == 0 &&
                   !seen_sequence) {
            seen_sequence = true;
        } else {
            st = vh_error_set(err, VH_ERR_BAD_MODEL, "%s: post_processor.single[%zu] is neither a "
                              "SpecialToken nor the one Sequence $A", name, i);
        }
        if (st) return st;
    }
    if (!seen_sequence)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: post_processor.single has no $A", name);
    return VH_OK;
}

static vh_status read_post_processor(vh_hf_tokenizer *tok, const json_t *spec, const char *name,
                                     vh_error *err)
{
    if (!spec || json_is_null(spec)) return VH_OK;
    const char *type = json_string_value(json_object_get(spec, "type"));
    if (!type)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: post_processor has no \"type\"", name);
    if (strcmp(type, "TemplateProcessing") == 0) return read_template(tok, spec, name, err);
    /* ByteLevel's post-processor only trims offsets: the ids are unchanged */
    if (strcmp(type, "ByteLevel") == 0) return VH_OK;
    if (strcmp(type, "Sequence") == 0) {
        const json_t *list = json_object_get(spec, "processors");
        if (!json_is_array(list))
            return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: post_processor Sequence has no "
                                "\"processors\" array", name);
        for (size_t i = 0; i < json_array_size(list); i++) {
            vh_status st = read_post_processor(tok, json_array_get(list, i), name, err);
            if (st) return st;
        }
        return VH_OK;
    }
    return vh_error_set(err, VH_ERR_UNSUPPORTED, "%s: post_processor type \"%.64s\" is not "
                        "supported (supported: TemplateProcessing, ByteLevel, Sequence)", name,
                        type);
}

/* truncation changes the ids of long texts, Fixed padding pads them: refused. BatchLongest
 * padding leaves a single text as it is. */
static vh_status check_length_options(const json_t *root, const char *name, vh_error *err)
{
    const json_t *truncation = json_object_get(root, "truncation");
    if (truncation && !json_is_null(truncation))
        return vh_error_set(err, VH_ERR_UNSUPPORTED, "%s: \"truncation\" is set; truncation is not "
                            "supported", name);
    const json_t *padding = json_object_get(root, "padding");
    if (padding && !json_is_null(padding)) {
        const json_t *strategy = json_object_get(padding, "strategy");
        if (!json_is_string(strategy) || strcmp(json_string_value(strategy), "BatchLongest") != 0)
            return vh_error_set(err, VH_ERR_UNSUPPORTED, "%s: \"padding\" with a fixed length is "
                                "not supported", name);
    }
    return VH_OK;
}

vh_status vh_hf_tokenizer_load_bytes(const char *data, size_t size, const char *name,
                                     vh_hf_tokenizer **out, vh_error *err)
{
    if (!out || (!data && size > 0))
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "vh_hf_tokenizer_load_bytes: NULL "
                            "argument");
    *out = NULL;
    if (!name) name = "tokenizer.json";
    if (size > VH_HF_TOKENIZER_MAX_FILE_BYTES)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: %zu bytes is larger than the %zu allowed",
                            name, size, VH_HF_TOKENIZER_MAX_FILE_BYTES);
    json_error_t jerr;
    json_t *root = json_loadb(data ? data : "", size, 0, &jerr);
    if (!root)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: not valid JSON (line %d, column %d: %s)",
                            name, jerr.line, jerr.column, jerr.text);
    vh_hf_tokenizer *tok = calloc(1, sizeof *tok);
    vh_status st = VH_OK;
    if (!tok) st = vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
    else if (!json_is_object(root))
        st = vh_error_set(err, VH_ERR_BAD_MODEL, "%s: the top level is not an object", name);
    else if (!json_object_get(root, "model"))
        st = vh_error_set(err, VH_ERR_BAD_MODEL, "%s: there is no \"model\"", name);
    /* init every part first, so vh_hf_tokenizer_free is safe whatever fails */
    if (tok) {
        tok->model.unk_id = -1;
        tok->added.max_id = -1;
    }
    if (!st) st = check_length_options(root, name, err);
    if (!st) st = vh_hf_bpe_model_from_json(json_object_get(root, "model"), name, &tok->model, err);
    if (!st) st = vh_hf_added_vocabulary_from_json(json_object_get(root, "added_tokens"), name,
                                                   &tok->added, err);
    if (!st) st = vh_hf_normalizer_from_json(json_object_get(root, "normalizer"), name,
                                             &tok->normalizer, err);
    if (!st) st = vh_hf_pretokenizer_from_json(json_object_get(root, "pre_tokenizer"), name,
                                               &tok->pretokenizer, err);
    if (!st) st = read_post_processor(tok, json_object_get(root, "post_processor"), name, err);
    json_decref(root);
    if (st) {
        vh_hf_tokenizer_free(tok);
        return st;
    }
    int32_t max_id = tok->model.max_id > tok->added.max_id ? tok->model.max_id : tok->added.max_id;
    for (size_t i = 0; i < tok->n_before; i++)
        if (tok->template_before[i] > max_id) max_id = tok->template_before[i];
    for (size_t i = 0; i < tok->n_after; i++)
        if (tok->template_after[i] > max_id) max_id = tok->template_after[i];
    tok->vocab_size = (uint32_t)max_id + 1;
    *out = tok;
    return VH_OK;
}

vh_status vh_hf_tokenizer_load(const char *path, vh_hf_tokenizer **out, vh_error *err)
{
    if (!out) return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "vh_hf_tokenizer_load: out is NULL");
    *out = NULL;
    if (!path)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "vh_hf_tokenizer_load: path is NULL");
    char *text = NULL;
    size_t len = 0;
    vh_status st = vh_read_text_file(path, VH_HF_TOKENIZER_MAX_FILE_BYTES, &text, &len, err);
    if (st) return st;
    st = vh_hf_tokenizer_load_bytes(text, len, path, out, err);
    free(text);
    return st;
}
