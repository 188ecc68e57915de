#include "text/added_vocabulary.h"

#include <stdlib.h>
#include <string.h>

#include "text/unicode_class.h"
#include "text/utf8.h"

/* Most added tokens a file may declare. */
#define MAX_ADDED_TOKENS (1u << 20)

static vh_status read_flag(const json_t *entry, const char *key, bool fallback, bool *out,
                           size_t i, const char *name, vh_error *err)
{
    const json_t *v = json_object_get(entry, key);
    *out = fallback;
    if (!v) return VH_OK;
    if (!json_is_boolean(v))
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: added_tokens[%zu].%s is not true/false",
                            name, i, key);
    *out = json_is_true(v);
    return VH_OK;
}

static vh_status build_set(vh_hf_added_set *set, const json_t *list,
                           const vh_hf_added_token *tokens, size_t n, bool normalized,
                           const char *name, vh_error *err)
{
    const char **keys = malloc((n ? n : 1) * sizeof *keys);
    if (!keys) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
    size_t n_keys = 0;
    vh_status st = VH_OK;
    for (size_t i = 0; i < n && !st; i++) {
        if (tokens[i].normalized != normalized) continue;
        const json_t *content = json_object_get(json_array_get(list, i), "content");
        keys[n_keys++] = json_string_value(content);
        st = vh_string_table_put(&set->index, json_string_value(content),
                                 json_string_length(content), (int32_t)i, err);
    }
    if (!st) st = vh_prefix_matcher_build(&set->matcher, keys, n_keys, err);
    free(keys);
    return st;
}

vh_status vh_hf_added_vocabulary_from_json(const json_t *list, const char *name,
                                           vh_hf_added_vocabulary *out, vh_error *err)
{
    memset(out, 0, sizeof *out);
    out->max_id = -1;
    vh_string_table_init(&out->raw.index);
    vh_string_table_init(&out->normalized.index);
    if (!list || json_is_null(list)) return VH_OK;
    if (!json_is_array(list))
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: added_tokens is not an array", name);
    size_t n = json_array_size(list);
    if (n > MAX_ADDED_TOKENS)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: %zu added tokens, more than %u", name, n,
                            MAX_ADDED_TOKENS);
    out->tokens = calloc(n ? n : 1, sizeof *out->tokens);
    if (!out->tokens) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
    out->n_tokens = n;
    vh_status st = VH_OK;
    for (size_t i = 0; i < n && !st; i++) {
        const json_t *e = json_array_get(list, i);
        const json_t *id = json_object_get(e, "id"), *content = json_object_get(e, "content");
        vh_hf_added_token *t = &out->tokens[i];
        if (!json_is_object(e) || !json_is_integer(id) || json_integer_value(id) < 0 ||
            json_integer_value(id) >= INT32_MAX || !json_is_string(content)) {
            st = vh_error_set(err, VH_ERR_BAD_MODEL, "%s: added_tokens[%zu] needs an \"id\" "
                              "(0 .. 2^31-2) and a \"content\" string", name, i);
            break;
        }
        size_t len = json_string_length(content);
        if (len == 0 || memchr(json_string_value(content), 0, len) ||
            !vh_utf8_is_valid((const uint8_t *)json_string_value(content), len)) {
            st = vh_error_set(err, VH_ERR_BAD_MODEL, "%s: added_tokens[%zu].content is empty or "
                              "holds a NUL character", name, i);
            break;
        }
        t->id = (int32_t)json_integer_value(id);
        if (t->id > out->max_id) out->max_id = t->id;
        st = read_flag(e, "special", false, &t->special, i, name, err);
        if (!st) st = read_flag(e, "normalized", !t->special, &t->normalized, i, name, err);
        if (!st) st = read_flag(e, "lstrip", false, &t->lstrip, i, name, err);
        if (!st) st = read_flag(e, "rstrip", false, &t->rstrip, i, name, err);
        if (!st) st = read_flag(e, "single_word", false, &t->single_word, i, name, err);
    }
    if (!st) st = build_set(&out->raw, list, out->tokens, n, false, name, err);
    if (!st) st = build_set(&out->normalized, list, out->tokens, n, true, name, err);
    if (st) vh_hf_added_vocabulary_release(out);
    return st;
}

void vh_hf_added_vocabulary_release(vh_hf_added_vocabulary *v)
{
    vh_prefix_matcher_release(&v->raw.matcher);
    vh_prefix_matcher_release(&v->normalized.matcher);
    vh_string_table_release(&v->raw.index);
    vh_string_table_release(&v->normalized.index);
    free(v->tokens);
    memset(v, 0, sizeof *v);
}

/* The code point that ends text[0 .. end) (end > 0), and where it starts. */
static uint32_t char_before(const uint8_t *text, size_t end, size_t *start)
{
    size_t s = end - 1;
    while (s > 0 && (text[s] & 0xC0) == 0x80) s--;
    size_t len;
    *start = s;
    return vh_utf8_decode_valid(text + s, end - s, &len);
}

static bool push(vh_hf_segment **segs, size_t *n, size_t *capacity, vh_hf_segment s)
{
    if (s.end == s.start) return true;
    if (*n == *capacity) {
        size_t c = *capacity ? *capacity * 2 : 16;
        vh_hf_segment *grown = realloc(*segs, c * sizeof *grown);
        if (!grown) return false;
        *segs = grown;
        *capacity = c;
    }
    (*segs)[(*n)++] = s;
    return true;
}

vh_status vh_hf_added_vocabulary_split(const vh_hf_added_vocabulary *v, bool normalized,
                                       const uint8_t *text, size_t size,
                                       vh_hf_segment **segments, size_t *n_segments,
                                       vh_error *err)
{
    const vh_hf_added_set *set = normalized ? &v->normalized : &v->raw;
    vh_hf_segment *segs = NULL;
    size_t n = 0, capacity = 0, done = 0; /* text[0 .. done) is in segments */
    bool ok = true;
    for (size_t pos = 0; pos < size && ok;) {
        size_t len = set->matcher.nodes ? vh_prefix_matcher_longest(&set->matcher, text + pos,
                                                                    size - pos)
                                        : 0;
        if (len == 0) {
            pos++;
            continue;
        }
        const vh_hf_added_token *t = &v->tokens[vh_string_table_get(&set->index, text + pos, len)];
        size_t start = pos, stop = pos + len, cs, clen;
        if (t->single_word) {
            bool word_before = start > 0 && vh_unicode_is_word(char_before(text, start, &cs));
            bool word_after = stop < size &&
                              vh_unicode_is_word(vh_utf8_decode_valid(text + stop, size - stop,
                                                                      &clen));
            if (word_before || word_after) {
                pos = stop; /* the search goes on after the discarded match */
                continue;
            }
        }
        if (t->lstrip)
            while (start > done && vh_unicode_is_white_space(char_before(text, start, &cs)))
                start = cs;
        if (t->rstrip)
            while (stop < size &&
                   vh_unicode_is_white_space(vh_utf8_decode_valid(text + stop, size - stop, &clen)))
                stop += clen;
        ok = push(&segs, &n, &capacity, (vh_hf_segment){done, start, -1}) &&
             push(&segs, &n, &capacity, (vh_hf_segment){start, stop, t->id});
        done = pos = stop;
    }
    if (ok) ok = push(&segs, &n, &capacity, (vh_hf_segment){done, size, -1});
    if (!ok) {
        free(segs);
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "tokenizer.json: out of memory");
    }
    *segments = segs;
    *n_segments = n;
    return VH_OK;
}
