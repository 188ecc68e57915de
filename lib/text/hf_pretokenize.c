#include "text/hf_pretokenize.h"

#include <stdlib.h>
#include <string.h>

#include "text/byte_level.h"
#include "text/unicode_class.h"
#include "text/utf8.h"

/* ---- reading ---------------------------------------------------------------------------- */

static vh_status add_step(vh_hf_pretokenizer *p, vh_hf_pretokenizer_step step, const char *name,
                          vh_error *err)
{
    vh_hf_pretokenizer_step *steps = realloc(p->steps, (p->n_steps + 1) * sizeof *steps);
    if (!steps) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
    p->steps = steps;
    p->steps[p->n_steps++] = step;
    return VH_OK;
}

/* A boolean member with a default. */
static vh_status member_bool(const json_t *spec, const char *key, bool fallback, bool *out,
                             const char *name, vh_error *err)
{
    const json_t *v = json_object_get(spec, key);
    *out = fallback;
    if (!v || json_is_null(v)) return VH_OK;
    if (!json_is_boolean(v))
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: pre_tokenizer member \"%s\" is not "
                            "true/false", name, key);
    *out = json_is_true(v);
    return VH_OK;
}

static vh_status read_metaspace(const json_t *spec, const char *name, vh_hf_pretokenizer_step *s,
                                vh_error *err)
{
    const json_t *replacement = json_object_get(spec, "replacement");
    const uint8_t *r = (const uint8_t *)json_string_value(replacement);
    size_t len = r ? json_string_length(replacement) : 0;
    if (!r || len == 0 || vh_utf8_valid_char_len(r, len) != len)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: Metaspace \"replacement\" is not one "
                            "character", name);
    memcpy(s->replacement, r, len);
    s->replacement_size = len;
    const json_t *scheme = json_object_get(spec, "prepend_scheme");
    if (json_is_string(scheme)) {
        const char *v = json_string_value(scheme);
        if (strcmp(v, "always") == 0) s->prepend_scheme = VH_HF_PREPEND_ALWAYS;
        else if (strcmp(v, "first") == 0) s->prepend_scheme = VH_HF_PREPEND_FIRST;
        else if (strcmp(v, "never") == 0) s->prepend_scheme = VH_HF_PREPEND_NEVER;
        else
            return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: Metaspace prepend_scheme \"%.32s\" is "
                                "not always/first/never", name, v);
    } else {
        /* files older than tokenizers 0.15 say add_prefix_space instead */
        bool add_prefix_space;
        vh_status st = member_bool(spec, "add_prefix_space", true, &add_prefix_space, name, err);
        if (st) return st;
        s->prepend_scheme = add_prefix_space ? VH_HF_PREPEND_ALWAYS : VH_HF_PREPEND_NEVER;
    }
    return member_bool(spec, "split", true, &s->split, name, err);
}

static vh_status read_split(const json_t *spec, const char *name, vh_hf_pretokenizer_step *s,
                            vh_error *err)
{
    const json_t *pattern = json_object_get(spec, "pattern");
    const json_t *regex = json_object_get(pattern, "Regex");
    if (!json_is_string(regex))
        return vh_error_set(err, VH_ERR_UNSUPPORTED, "%s: Split pre-tokenizer without a Regex "
                            "pattern is not supported", name);
    if (!vh_split_pattern_find(json_string_value(regex), &s->pattern))
        return vh_error_set(err, VH_ERR_UNSUPPORTED, "%s: Split pattern /%.200s/ is not supported "
                            "(only GPT-2's and Qwen2's patterns are)", name,
                            json_string_value(regex));
    const json_t *behavior = json_object_get(spec, "behavior");
    if (!json_is_string(behavior) || strcmp(json_string_value(behavior), "Isolated") != 0)
        return vh_error_set(err, VH_ERR_UNSUPPORTED, "%s: Split behavior \"%.32s\" is not "
                            "supported (only Isolated)", name,
                            json_is_string(behavior) ? json_string_value(behavior) : "?");
    bool invert;
    vh_status st = member_bool(spec, "invert", false, &invert, name, err);
    if (!st && invert)
        st = vh_error_set(err, VH_ERR_UNSUPPORTED, "%s: Split with invert true is not supported",
                          name);
    return st;
}

static vh_status read_spec(const json_t *spec, const char *name, vh_hf_pretokenizer *p,
                           vh_error *err)
{
    const char *type = json_string_value(json_object_get(spec, "type"));
    if (!json_is_object(spec) || !type)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: a pre_tokenizer is not an object with a "
                            "\"type\"", name);
    if (strcmp(type, "Sequence") == 0) {
        const json_t *list = json_object_get(spec, "pretokenizers");
        if (!json_is_array(list))
            return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: pre_tokenizer Sequence has no "
                                "\"pretokenizers\" array", name);
        for (size_t i = 0; i < json_array_size(list); i++) {
            vh_status st = read_spec(json_array_get(list, i), name, p, err);
            if (st) return st;
        }
        return VH_OK;
    }
    vh_hf_pretokenizer_step s = {0};
    vh_status st;
    if (strcmp(type, "Metaspace") == 0) {
        s.kind = VH_HF_PRETOKENIZER_METASPACE;
        st = read_metaspace(spec, name, &s, err);
    } else if (strcmp(type, "ByteLevel") == 0) {
        s.kind = VH_HF_PRETOKENIZER_BYTE_LEVEL;
        s.pattern = VH_SPLIT_PATTERN_GPT2;
        st = member_bool(spec, "add_prefix_space", true, &s.add_prefix_space, name, err);
        if (!st) st = member_bool(spec, "use_regex", true, &s.use_regex, name, err);
    } else if (strcmp(type, "Split") == 0) {
        s.kind = VH_HF_PRETOKENIZER_SPLIT;
        st = read_split(spec, name, &s, err);
    } else {
        return vh_error_set(err, VH_ERR_UNSUPPORTED, "%s: pre_tokenizer type \"%.64s\" is not "
                            "supported (supported: Metaspace, ByteLevel, Split, Sequence)", name,
                            type);
    }
    return st ? st : add_step(p, s, name, err);
}

vh_status vh_hf_pretokenizer_from_json(const json_t *spec, const char *name,
                                       vh_hf_pretokenizer *out, vh_error *err)
{
    memset(out, 0, sizeof *out);
    if (!spec || json_is_null(spec)) return VH_OK;
    vh_status st = read_spec(spec, name, out, err);
    if (st) vh_hf_pretokenizer_release(out);
    return st;
}

void vh_hf_pretokenizer_release(vh_hf_pretokenizer *p)
{
    free(p->steps);
    memset(p, 0, sizeof *p);
}

/* ---- word lists ------------------------------------------------------------------------- */

void vh_hf_word_list_release(vh_hf_word_list *list)
{
    free(list->text);
    free(list->words);
    memset(list, 0, sizeof *list);
}

/* Append bytes to the list's text without starting a word. */
static bool append_text(vh_hf_word_list *l, const void *bytes, size_t size)
{
    if (l->text_size + size > l->text_capacity || !l->text) {
        size_t capacity = l->text_capacity ? l->text_capacity : 256;
        while (capacity < l->text_size + size) capacity *= 2;
        uint8_t *text = realloc(l->text, capacity);
        if (!text) return false;
        l->text = text;
        l->text_capacity = capacity;
    }
    if (size) memcpy(l->text + l->text_size, bytes, size);
    l->text_size += size;
    return true;
}

/* End the word that began at text offset start (dropped when empty). */
static bool end_word(vh_hf_word_list *l, size_t start, bool at_input_start)
{
    if (l->text_size == start) return true;
    if (l->n_words == l->words_capacity) {
        size_t capacity = l->words_capacity ? l->words_capacity * 2 : 32;
        vh_hf_word *words = realloc(l->words, capacity * sizeof *words);
        if (!words) return false;
        l->words = words;
        l->words_capacity = capacity;
    }
    l->words[l->n_words++] = (vh_hf_word){start, l->text_size - start, at_input_start};
    return true;
}

static bool starts_with(const uint8_t *text, size_t size, const void *prefix, size_t n)
{
    return size >= n && memcmp(text, prefix, n) == 0;
}

/* Metaspace on one word. */
static bool metaspace(const vh_hf_pretokenizer_step *s, const uint8_t *w, size_t size,
                      bool at_input_start, vh_hf_word_list *out)
{
    /* the word with spaces replaced, into the list's text, then cut */
    size_t start = out->text_size;
    bool ok = true;
    bool starts_with_replacement = size > 0 && (w[0] == ' ' ||
                                   starts_with(w, size, s->replacement, s->replacement_size));
    if ((s->prepend_scheme == VH_HF_PREPEND_ALWAYS ||
         (s->prepend_scheme == VH_HF_PREPEND_FIRST && at_input_start)) &&
        !starts_with_replacement)
        ok = append_text(out, s->replacement, s->replacement_size);
    for (size_t i = 0; i < size && ok; i++)
        ok = w[i] == ' ' ? append_text(out, s->replacement, s->replacement_size)
                         : append_text(out, &w[i], 1);
    if (!ok) return false;
    if (!s->split) return end_word(out, start, at_input_start);
    /* MergedWithNext: each replacement starts a word */
    size_t end = out->text_size, word_start = start;
    for (size_t i = start; i < end; i += vh_utf8_lead_len(out->text[i])) {
        if (i > word_start && starts_with(out->text + i, end - i, s->replacement,
                                          s->replacement_size)) {
            size_t saved = out->text_size;
            out->text_size = i;
            ok = end_word(out, word_start, at_input_start && word_start == start);
            out->text_size = saved;
            if (!ok) return false;
            word_start = i;
        }
    }
    return end_word(out, word_start, at_input_start && word_start == start);
}

/* Isolated split by a pattern; byte_level: spell each piece as ByteLevel does. */
static bool split_by_pattern(vh_split_pattern pattern, bool use_pattern, bool byte_level,
                             const uint8_t *w, size_t size, bool at_input_start,
                             vh_hf_word_list *out)
{
    for (size_t pos = 0; pos < size;) {
        size_t n = use_pattern ? vh_split_pattern_match(pattern, w, size, pos) : size;
        size_t start = out->text_size;
        bool ok;
        if (byte_level) {
            uint8_t spelled[8];
            ok = true;
            for (size_t i = 0; i < n && ok; i++)
                ok = append_text(out, spelled, vh_byte_level_spell(&w[pos + i], 1, spelled));
        } else {
            ok = append_text(out, w + pos, n);
        }
        if (!ok || !end_word(out, start, at_input_start && pos == 0)) return false;
        pos += n;
    }
    return true;
}

static bool apply_step(const vh_hf_pretokenizer_step *s, const uint8_t *w, size_t size,
                       bool at_input_start, vh_hf_word_list *out)
{
    switch (s->kind) {
    case VH_HF_PRETOKENIZER_METASPACE: return metaspace(s, w, size, at_input_start, out);
    case VH_HF_PRETOKENIZER_SPLIT:
        return split_by_pattern(s->pattern, true, false, w, size, at_input_start, out);
    case VH_HF_PRETOKENIZER_BYTE_LEVEL:
        if (s->add_prefix_space && !(size > 0 && w[0] == ' ')) {
            /* the space goes through the pattern with the text: copy them together */
            uint8_t *with_space = malloc(size + 1);
            if (!with_space) return false;
            with_space[0] = ' ';
            if (size) memcpy(with_space + 1, w, size);
            bool ok = split_by_pattern(s->pattern, s->use_regex, true, with_space, size + 1,
                                       at_input_start, out);
            free(with_space);
            return ok;
        }
        return split_by_pattern(s->pattern, s->use_regex, true, w, size, at_input_start, out);
    }
    return false;
}

vh_status vh_hf_pretokenize(const vh_hf_pretokenizer *p, const uint8_t *text, size_t size,
                            bool at_input_start, vh_hf_word_list *out, vh_error *err)
{
    memset(out, 0, sizeof *out);
    vh_hf_word_list current = {0};
    bool ok = append_text(&current, text, size) && end_word(&current, 0, at_input_start);
    for (size_t i = 0; i < p->n_steps && ok; i++) {
        vh_hf_word_list next = {0};
        for (size_t k = 0; k < current.n_words && ok; k++) {
            const vh_hf_word *w = &current.words[k];
            ok = apply_step(&p->steps[i], current.text + w->start, w->size, w->at_input_start,
                            &next);
        }
        vh_hf_word_list_release(&current);
        current = next;
    }
    if (!ok) {
        vh_hf_word_list_release(&current);
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "tokenizer.json: out of memory "
                            "pre-tokenizing %zu bytes", size);
    }
    *out = current;
    return VH_OK;
}
