#include "text/hf_bpe_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/utf8.h"

/* Most vocab entries and merges a file may declare (Qwen2's vocab is 151k). */
#define MAX_VOCAB (16u << 20)
#define MAX_MERGES (16u << 20)

struct vh_hf_merge_slot {
    uint64_t pair;   /* left id << 32 | right id */
    uint32_t rank;   /* index in the merges list */
    int32_t new_id;  /* -1: the slot is empty */
};

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static vh_hf_merge_slot *merge_slot(const vh_hf_bpe_model *m, uint64_t pair)
{
    for (size_t i = (size_t)mix(pair) & m->merge_mask;; i = (i + 1) & m->merge_mask) {
        vh_hf_merge_slot *s = &m->merges[i];
        if (s->new_id < 0 || s->pair == pair) return s;
    }
}

static const vh_hf_merge_slot *find_merge(const vh_hf_bpe_model *m, int32_t left, int32_t right)
{
    const vh_hf_merge_slot *s = merge_slot(m, (uint64_t)(uint32_t)left << 32 | (uint32_t)right);
    return s->new_id >= 0 ? s : NULL;
}

/* ---- loading ---------------------------------------------------------------------------- */

static vh_status read_vocab(vh_hf_bpe_model *m, const json_t *vocab, const char *name,
                            vh_error *err)
{
    if (!json_is_object(vocab))
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: model.vocab is not an object", name);
    if (json_object_size(vocab) > MAX_VOCAB)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: model.vocab has %zu entries, more than %u",
                            name, json_object_size(vocab), MAX_VOCAB);
    const char *key;
    size_t key_len;
    json_t *value;
    void *iter;
    m->max_id = -1;
    for (iter = json_object_iter((json_t *)vocab); iter;
         iter = json_object_iter_next((json_t *)vocab, iter)) {
        key = json_object_iter_key(iter);
        key_len = json_object_iter_key_len(iter);
        value = json_object_iter_value(iter);
        json_int_t id = json_is_integer(value) ? json_integer_value(value) : -1;
        if (id < 0 || id >= INT32_MAX)
            return vh_error_set(err, VH_ERR_BAD_MODEL,
                                "%s: model.vocab[\"%.64s\"] is not an id (an integer 0 .. 2^31-2)",
                                name, key);
        vh_status st = vh_string_table_put(&m->vocab, key, key_len, (int32_t)id, err);
        if (st) return st;
        if (id > m->max_id) m->max_id = (int32_t)id;
    }
    return VH_OK;
}

/* One merge as its two parts: ["a", "b"] or "a b" (exactly one space). */
static vh_status merge_parts(const json_t *merge, size_t rank, const char *name, const char **a,
                             size_t *a_len, const char **b, size_t *b_len, vh_error *err)
{
    if (json_is_array(merge) && json_array_size(merge) == 2 &&
        json_is_string(json_array_get(merge, 0)) && json_is_string(json_array_get(merge, 1))) {
        *a = json_string_value(json_array_get(merge, 0));
        *a_len = json_string_length(json_array_get(merge, 0));
        *b = json_string_value(json_array_get(merge, 1));
        *b_len = json_string_length(json_array_get(merge, 1));
        return VH_OK;
    }
    if (json_is_string(merge)) {
        const char *s = json_string_value(merge);
        size_t len = json_string_length(merge);
        const char *space = memchr(s, ' ', len);
        if (space && !memchr(space + 1, ' ', len - (size_t)(space + 1 - s))) {
            *a = s, *a_len = (size_t)(space - s);
            *b = space + 1, *b_len = len - *a_len - 1;
            return VH_OK;
        }
    }
    return vh_error_set(err, VH_ERR_BAD_MODEL,
                        "%s: model.merges[%zu] is neither [\"a\", \"b\"] nor \"a b\"", name, rank);
}

static vh_status read_merges(vh_hf_bpe_model *m, const json_t *merges, const char *name,
                             vh_error *err)
{
    if (merges && !json_is_array(merges))
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: model.merges is not an array", name);
    size_t n = merges ? json_array_size(merges) : 0;
    if (n > MAX_MERGES)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: %zu merges, more than %u", name, n,
                            MAX_MERGES);
    size_t n_slots = 16;
    while (n_slots < n * 2) n_slots *= 2;
    m->merges = malloc(n_slots * sizeof *m->merges);
    if (!m->merges) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
    for (size_t i = 0; i < n_slots; i++) m->merges[i].new_id = -1;
    m->merge_mask = n_slots - 1;

    char *joined = NULL;
    size_t joined_capacity = 0;
    vh_status st = VH_OK;
    for (size_t rank = 0; rank < n && st == VH_OK; rank++) {
        const char *a = NULL, *b = NULL;
        size_t a_len = 0, b_len = 0;
        st = merge_parts(json_array_get(merges, rank), rank, name, &a, &a_len, &b, &b_len, err);
        if (st) break;
        if (a_len + b_len > joined_capacity) {
            joined_capacity = (a_len + b_len) * 2;
            char *grown = realloc(joined, joined_capacity);
            if (!grown) {
                st = vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
                break;
            }
            joined = grown;
        }
        if (a_len) memcpy(joined, a, a_len);
        if (b_len) memcpy(joined + a_len, b, b_len);
        int32_t a_id = vh_string_table_get(&m->vocab, a, a_len);
        int32_t b_id = vh_string_table_get(&m->vocab, b, b_len);
        int32_t new_id = a_len + b_len ? vh_string_table_get(&m->vocab, joined, a_len + b_len) : -1;
        if (a_id < 0 || b_id < 0 || new_id < 0) {
            const char *missing = a_id < 0 ? a : b_id < 0 ? b : joined;
            int missing_len = (int)(a_id < 0 ? a_len : b_id < 0 ? b_len : a_len + b_len);
            st = vh_error_set(err, VH_ERR_BAD_MODEL,
                              "%s: model.merges[%zu]: \"%.*s\" is not in the vocab", name, rank,
                              missing_len > 64 ? 64 : missing_len, missing);
            break;
        }
        /* a later duplicate replaces an earlier one, as tokenizers' HashMap collect does */
        vh_hf_merge_slot *s = merge_slot(m, (uint64_t)(uint32_t)a_id << 32 | (uint32_t)b_id);
        *s = (vh_hf_merge_slot){(uint64_t)(uint32_t)a_id << 32 | (uint32_t)b_id, (uint32_t)rank,
                                new_id};
    }
    free(joined);
    return st;
}

/* A member that must be absent, null or (for strings) empty. */
static vh_status refuse_option(const json_t *model, const char *key, const char *name,
                               vh_error *err)
{
    const json_t *v = json_object_get(model, key);
    if (!v || json_is_null(v) || (json_is_string(v) && json_string_length(v) == 0)) return VH_OK;
    return vh_error_set(err, VH_ERR_UNSUPPORTED, "%s: model.%s is set; BPE models with %s are not "
                        "supported", name, key, key);
}

static vh_status read_bool(const json_t *model, const char *key, bool *out, const char *name,
                           vh_error *err)
{
    const json_t *v = json_object_get(model, key);
    if (!v || json_is_null(v)) {
        *out = false;
        return VH_OK;
    }
    if (!json_is_boolean(v))
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: model.%s is not true/false", name, key);
    *out = json_is_true(v);
    return VH_OK;
}

vh_status vh_hf_bpe_model_from_json(const json_t *model, const char *name, vh_hf_bpe_model *out,
                                    vh_error *err)
{
    memset(out, 0, sizeof *out);
    out->unk_id = -1;
    for (int b = 0; b < 256; b++) out->byte_ids[b] = -1;
    if (!json_is_object(model))
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: \"model\" is not an object", name);
    const json_t *type = json_object_get(model, "type");
    if (!json_is_string(type))
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: model.type is missing", name);
    if (strcmp(json_string_value(type), "BPE") != 0)
        return vh_error_set(err, VH_ERR_UNSUPPORTED,
                            "%s: model.type is \"%.64s\"; only BPE models are supported", name,
                            json_string_value(type));
    const json_t *dropout = json_object_get(model, "dropout");
    if (dropout && !json_is_null(dropout) && !(json_is_number(dropout) && json_number_value(dropout) == 0))
        return vh_error_set(err, VH_ERR_UNSUPPORTED,
                            "%s: model.dropout is set; BPE dropout (random merges) is not "
                            "supported", name);
    vh_status st = refuse_option(model, "continuing_subword_prefix", name, err);
    if (!st) st = refuse_option(model, "end_of_word_suffix", name, err);
    if (!st) st = read_bool(model, "fuse_unk", &out->fuse_unk, name, err);
    if (!st) st = read_bool(model, "byte_fallback", &out->byte_fallback, name, err);
    if (!st) st = read_bool(model, "ignore_merges", &out->ignore_merges, name, err);
    if (!st) st = read_vocab(out, json_object_get(model, "vocab"), name, err);
    if (!st) st = read_merges(out, json_object_get(model, "merges"), name, err);
    if (!st) {
        const json_t *unk = json_object_get(model, "unk_token");
        if (json_is_string(unk)) {
            out->unk_id = vh_string_table_get(&out->vocab, json_string_value(unk),
                                              json_string_length(unk));
            /* tokenizers fails at encode time (UnkTokenOutOfVocabulary); refuse it up front */
            if (out->unk_id < 0)
                st = vh_error_set(err, VH_ERR_BAD_MODEL, "%s: model.unk_token \"%.64s\" is not in "
                                  "the vocab", name, json_string_value(unk));
        } else if (unk && !json_is_null(unk)) {
            st = vh_error_set(err, VH_ERR_BAD_MODEL, "%s: model.unk_token is not a string", name);
        }
    }
    if (st) {
        vh_hf_bpe_model_release(out);
        return st;
    }
    for (int b = 0; b < 256; b++) {
        char piece[8];
        snprintf(piece, sizeof piece, "<0x%02X>", b);
        out->byte_ids[b] = vh_string_table_get(&out->vocab, piece, 6);
    }
    return VH_OK;
}

void vh_hf_bpe_model_release(vh_hf_bpe_model *m)
{
    vh_string_table_release(&m->vocab);
    free(m->merges);
    m->merges = NULL;
}

/* ---- encoding --------------------------------------------------------------------------- */

typedef struct symbol {
    int32_t id;
    int32_t prev, next; /* -1 at the ends */
    bool removed;
} symbol;

typedef struct merge_candidate {
    uint32_t rank, pos;
    int32_t new_id;
} merge_candidate;

/* tokenizers' Merge ordering: the lowest rank first, then the leftmost position. */
static bool before(const merge_candidate *a, const merge_candidate *b)
{
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

typedef struct merge_heap {
    merge_candidate *items;
    size_t n;
} merge_heap;

static void heap_push(merge_heap *h, merge_candidate c)
{
    size_t i = h->n++;
    while (i > 0 && before(&c, &h->items[(i - 1) / 2])) {
        h->items[i] = h->items[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->items[i] = c;
}

static merge_candidate heap_pop(merge_heap *h)
{
    merge_candidate top = h->items[0], last = h->items[--h->n];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= h->n) break;
        if (child + 1 < h->n && before(&h->items[child + 1], &h->items[child])) child++;
        if (!before(&h->items[child], &last)) break;
        h->items[i] = h->items[child];
        i = child;
    }
    if (h->n > 0) h->items[i] = last;
    return top;
}

static void propose(const vh_hf_bpe_model *m, merge_heap *h, const symbol *symbols, int32_t pos)
{
    if (pos < 0 || symbols[pos].next < 0) return;
    const vh_hf_merge_slot *s = find_merge(m, symbols[pos].id, symbols[symbols[pos].next].id);
    if (s) heap_push(h, (merge_candidate){s->rank, (uint32_t)pos, s->new_id});
}

/* models::bpe::Word::merge_all. */
static void merge_all(const vh_hf_bpe_model *m, symbol *symbols, size_t n, merge_heap *h)
{
    for (size_t i = 0; i + 1 < n; i++) propose(m, h, symbols, (int32_t)i);
    while (h->n > 0) {
        merge_candidate top = heap_pop(h);
        symbol *left = &symbols[top.pos];
        if (left->removed || left->next < 0) continue;
        symbol *right = &symbols[left->next];
        /* a stale candidate: the pair there now does not merge into the same token */
        const vh_hf_merge_slot *s = find_merge(m, left->id, right->id);
        if (!s || s->new_id != top.new_id) continue;
        left->id = top.new_id;
        left->next = right->next;
        right->removed = true;
        if (right->next >= 0) symbols[right->next].prev = (int32_t)top.pos;
        propose(m, h, symbols, left->prev);
        propose(m, h, symbols, (int32_t)top.pos);
    }
}

vh_status vh_hf_bpe_model_encode(const vh_hf_bpe_model *m, const uint8_t *word, size_t size,
                                 vh_id_list *out, vh_error *err)
{
    if (size == 0) return VH_OK;
    if (m->ignore_merges) {
        int32_t id = vh_string_table_get(&m->vocab, word, size);
        if (id >= 0) {
            if (!vh_id_list_push(out, id)) goto out_of_memory;
            return VH_OK;
        }
    }
    /* at most one symbol per byte (byte fallback), the heap at most 3 per symbol */
    symbol *symbols = malloc(size * sizeof *symbols);
    merge_heap heap = {malloc(size * 3 * sizeof *heap.items), 0};
    if (!symbols || !heap.items) {
        free(symbols);
        free(heap.items);
        goto out_of_memory;
    }
    size_t n = 0;
    int32_t pending_unk = -1; /* an unk symbol not yet added (tokenizers fuses into it) */
    for (size_t pos = 0; pos < size;) {
        size_t len = vh_utf8_lead_len(word[pos]);
        if (len > size - pos) len = size - pos;
        int32_t id = vh_string_table_get(&m->vocab, word + pos, len);
        bool bytes_known = m->byte_fallback;
        for (size_t i = 0; id < 0 && bytes_known && i < len; i++)
            bytes_known = m->byte_ids[word[pos + i]] >= 0;
        if (id >= 0 || (m->byte_fallback && bytes_known)) {
            if (pending_unk >= 0) symbols[n++].id = pending_unk, pending_unk = -1;
            if (id >= 0) symbols[n++].id = id;
            else
                for (size_t i = 0; i < len; i++) symbols[n++].id = m->byte_ids[word[pos + i]];
        } else if (m->unk_id >= 0) {
            if (pending_unk >= 0 && !m->fuse_unk) symbols[n++].id = pending_unk;
            pending_unk = m->unk_id;
        }
        pos += len;
    }
    if (pending_unk >= 0) symbols[n++].id = pending_unk;
    for (size_t i = 0; i < n; i++) {
        symbols[i].prev = (int32_t)i - 1;
        symbols[i].next = i + 1 < n ? (int32_t)i + 1 : -1;
        symbols[i].removed = false;
    }
    merge_all(m, symbols, n, &heap);
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++)
        if (!symbols[i].removed) ok = vh_id_list_push(out, symbols[i].id);
    free(symbols);
    free(heap.items);
    if (ok) return VH_OK;
out_of_memory:
    return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "tokenizer.json: out of memory encoding a "
                        "word of %zu bytes", size);
}
