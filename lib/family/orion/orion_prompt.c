#include "family/orion/orion_prompt.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

typedef struct id_list {
    int32_t *ids;
    size_t n, cap;
} id_list;

static int push(id_list *l, const int32_t *ids, size_t n)
{
    if (l->n + n > l->cap) {
        size_t cap = (l->n + n) * 2 + 16;
        int32_t *grown = realloc(l->ids, sizeof *grown * cap);
        if (!grown) return 0;
        l->ids = grown;
        l->cap = cap;
    }
    memcpy(l->ids + l->n, ids, sizeof *ids * n);
    l->n += n;
    return 1;
}

/* The special or added token starting at text[at], or -1; *strip: an added token (strips). */
static int match_token(const vh_tokenizer *tok, const vh_added_token *added, uint32_t n_added, const char *text,
                       size_t at, size_t *len, int32_t *id, int *strip)
{
    static const char *const special[] = {"<s>", "</s>", "<unk>"};
    for (uint32_t i = 0; i < n_added; i++) {
        size_t l = strlen(added[i].text);
        if (l && strncmp(text + at, added[i].text, l) == 0) {
            *len = l, *id = added[i].id, *strip = 1;
            return 1;
        }
    }
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) {
        size_t l = strlen(special[i]);
        int32_t sid = vh_tokenizer_piece_to_id(tok, special[i]);
        if (sid >= 0 && strncmp(text + at, special[i], l) == 0) {
            *len = l, *id = sid, *strip = 0;
            return 1;
        }
    }
    return 0;
}

/* text[begin, end) trimmed where a neighbouring added token strips it, encoded onto l. */
static vh_status encode_piece(const vh_tokenizer *tok, const char *text, size_t begin, size_t end, int strip_left,
                              int strip_right, id_list *l, vh_error *err)
{
    while (strip_left && begin < end && isspace((unsigned char)text[begin])) begin++;
    while (strip_right && end > begin && isspace((unsigned char)text[end - 1])) end--;
    if (begin == end) return VH_OK;
    int32_t *ids = NULL;
    size_t n = 0;
    vh_status st = vh_tokenizer_encode(tok, text + begin, end - begin, &ids, &n, err);
    if (!st && n && !push(l, ids, n)) st = vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (prompt)");
    free(ids);
    return st;
}

/* One part of the text (before or after the image marker), as 4.31's tokenize() cuts it. */
static vh_status encode_part(const vh_tokenizer *tok, const char *text, size_t len, const vh_added_token *added,
                             uint32_t n_added, id_list *l, vh_error *err)
{
    size_t piece = 0;
    int strip_left = 0;
    for (size_t at = 0; at < len;) {
        size_t tl;
        int32_t id;
        int strip;
        if (!match_token(tok, added, n_added, text, at, &tl, &id, &strip)) {
            at++;
            continue;
        }
        vh_status st = encode_piece(tok, text, piece, at, strip_left, strip, l, err);
        if (st) return st;
        if (!push(l, &id, 1)) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (prompt)");
        at += tl;
        piece = at;
        strip_left = strip;
    }
    return encode_piece(tok, text, piece, len, strip_left, 0, l, err);
}

vh_status vh_orion_prompt_ids(const vh_tokenizer *tok, const char *text, const char *image_marker,
                              const vh_added_token *added, uint32_t n_added, int32_t bos_id, int add_bos,
                              int32_t **ids, size_t *n_ids, size_t *image_index, vh_error *err)
{
    *ids = NULL;
    *n_ids = *image_index = 0;
    const char *marker = strstr(text, image_marker);
    if (!marker) return vh_error_set(err, VH_ERR_BAD_MODEL, "the prompt has no image marker '%s'", image_marker);
    id_list l = {0};
    vh_status st = VH_OK;
    if (add_bos && !push(&l, &bos_id, 1)) st = vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (prompt)");
    if (!st) st = encode_part(tok, text, (size_t)(marker - text), added, n_added, &l, err);
    *image_index = l.n;
    const char *after = marker + strlen(image_marker);
    if (!st) st = encode_part(tok, after, strlen(after), added, n_added, &l, err);
    if (st) {
        free(l.ids);
        return st;
    }
    *ids = l.ids;
    *n_ids = l.n;
    return VH_OK;
}
