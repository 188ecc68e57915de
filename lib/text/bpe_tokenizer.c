#include "text/bpe_tokenizer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "text/piece_table.h"
#include "text/prefix_matcher.h"
#include "text/sentencepiece_model.h"
#include "text/text_normalizer.h"
#include "text/utf8.h"
#include "util/file_read.h"

#define NO_SYMBOL UINT32_MAX

struct vh_tokenizer {
    vh_sp_model model;               /* owns the pieces */
    vh_piece_table table;            /* piece text -> ids */
    vh_prefix_matcher user_defined;  /* USER_DEFINED pieces, matched whole */
    vh_text_normalizer normalizer;
    int32_t unk_id;                  /* the UNKNOWN piece */
    int32_t bos_id, eos_id;          /* -1 when absent */
    int32_t byte_ids[256];           /* <0xXX> pieces, when model.byte_fallback */
    uint32_t n_unused;               /* UNUSED pieces */
    int32_t *unused_slot;            /* [n_pieces]: index among UNUSED pieces or -1; NULL: none */
};

/* ---- loading ---------------------------------------------------------------------------- */

/* "<0x41>" -> 0x41; -1 unless the text is exactly "<0x" two uppercase hex digits ">", the only
 * spelling sentencepiece accepts. */
static int byte_piece_value(const vh_sp_piece *p)
{
    static const char hex[] = "0123456789ABCDEF";
    if (p->size != 6 || memcmp(p->text, "<0x", 3) != 0 || p->text[5] != '>') return -1;
    const char *hi = memchr(hex, p->text[3], 16), *lo = memchr(hex, p->text[4], 16);
    if (!hi || !lo) return -1;
    return (int)((hi - hex) * 16 + (lo - hex));
}

/* Id that sentencepiece's PieceToId gives a text: reserved first, then normal, else -1. */
static int32_t lookup_id(const vh_tokenizer *tok, const void *text, size_t size)
{
    vh_piece_ids ids = vh_piece_table_find(&tok->table, text, size);
    return ids.reserved_id >= 0 ? ids.reserved_id : ids.normal_id;
}

/* sentencepiece's bos_id()/eos_id(): the id of that piece if it is a CONTROL piece, else -1. */
static int32_t control_id(const vh_tokenizer *tok, const char *piece)
{
    int32_t id = lookup_id(tok, piece, strlen(piece));
    if (id >= 0 && tok->model.pieces[id].type == VH_SP_PIECE_CONTROL) return id;
    return -1;
}

/* Refuse what the encoder below does not reproduce exactly. */
static vh_status check_supported(const vh_sp_model *m, const char *name, vh_error *err)
{
    static const char *const type_names[] = {"?", "UNIGRAM", "BPE", "WORD", "CHAR"};
    if (m->model_type != VH_SP_MODEL_BPE) {
        const char *type = m->model_type >= 1 && m->model_type <= 4 ? type_names[m->model_type]
                                                                     : "unknown";
        return vh_error_set(err, VH_ERR_UNSUPPORTED,
                            "%s: trainer_spec.model_type is %s (%d); only BPE models are supported",
                            name, type, (int)m->model_type);
    }
    if (m->precompiled_charsmap_size > 0)
        return vh_error_set(err, VH_ERR_UNSUPPORTED,
                            "%s: normalizer \"%s\" has character rules (precompiled_charsmap of "
                            "%zu bytes); only the identity normalizer is supported",
                            name, m->normalizer_name, m->precompiled_charsmap_size);
    if (m->normalizer_name[0] && strcmp(m->normalizer_name, "identity") != 0)
        return vh_error_set(err, VH_ERR_UNSUPPORTED,
                            "%s: normalizer_spec.name is \"%s\"; only \"identity\" is supported",
                            name, m->normalizer_name);
    return VH_OK;
}

/* The piece checks of sentencepiece's ModelInterface::InitializePieces, and the per-type
 * tables the encoder needs. */
static vh_status index_pieces(vh_tokenizer *tok, const char *name, vh_error *err)
{
    const vh_sp_model *m = &tok->model;
    bool byte_found[256] = {false};
    uint32_t n_user_defined = 0;
    tok->unk_id = -1;
    for (uint32_t id = 0; id < m->n_pieces; id++) {
        const vh_sp_piece *p = &m->pieces[id];
        switch (p->type) {
        case VH_SP_PIECE_UNKNOWN:
            if (tok->unk_id >= 0)
                return vh_error_set(err, VH_ERR_BAD_MODEL,
                                    "%s: pieces %d and %u are both UNKNOWN", name, tok->unk_id, id);
            tok->unk_id = (int32_t)id;
            break;
        case VH_SP_PIECE_BYTE: {
            if (!m->byte_fallback)
                return vh_error_set(err, VH_ERR_BAD_MODEL,
                                    "%s: piece %u \"%s\" is a BYTE piece but byte_fallback is off",
                                    name, id, p->text);
            int value = byte_piece_value(p);
            if (value < 0)
                return vh_error_set(err, VH_ERR_BAD_MODEL,
                                    "%s: BYTE piece %u \"%s\" is not of the form <0xXX>", name, id,
                                    p->text);
            byte_found[value] = true;
            break;
        }
        case VH_SP_PIECE_USER_DEFINED: n_user_defined++; break;
        case VH_SP_PIECE_UNUSED: tok->n_unused++; break;
        default: break;
        }
    }
    if (tok->unk_id < 0)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: no UNKNOWN piece", name);
    if (m->byte_fallback) {
        for (int b = 0; b < 256; b++) {
            if (!byte_found[b])
                return vh_error_set(err, VH_ERR_BAD_MODEL,
                                    "%s: byte_fallback is on but there is no piece <0x%02X>", name,
                                    b);
            char text[8];
            snprintf(text, sizeof text, "<0x%02X>", b);
            tok->byte_ids[b] = lookup_id(tok, text, 6);
        }
    }

    if (tok->n_unused > 0) {
        tok->unused_slot = malloc((size_t)m->n_pieces * sizeof *tok->unused_slot);
        if (!tok->unused_slot)
            return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
        int32_t next = 0;
        for (uint32_t id = 0; id < m->n_pieces; id++)
            tok->unused_slot[id] = m->pieces[id].type == VH_SP_PIECE_UNUSED ? next++ : -1;
    }

    const char **keys = NULL;
    if (n_user_defined > 0) {
        keys = malloc((size_t)n_user_defined * sizeof *keys);
        if (!keys) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
        uint32_t k = 0;
        for (uint32_t id = 0; id < m->n_pieces; id++)
            if (m->pieces[id].type == VH_SP_PIECE_USER_DEFINED) keys[k++] = m->pieces[id].text;
    }
    vh_status st = vh_prefix_matcher_build(&tok->user_defined, keys, n_user_defined, err);
    free(keys);
    if (st != VH_OK && err) vh_error_prefix(err, "%s: ", name);
    return st;
}

vh_status vh_tokenizer_load_bytes(const uint8_t *data, size_t size, const char *name,
                                  vh_tokenizer **out, vh_error *err)
{
    if (!out || (!data && size > 0))
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "vh_tokenizer_load_bytes: NULL argument");
    *out = NULL;
    if (!name) name = "tokenizer.model";
    if (size == 0) return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: the model is empty", name);

    vh_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "%s: out of memory", name);

    vh_status st = vh_sp_model_parse(data, size, name, &tok->model, err);
    if (st == VH_OK) st = check_supported(&tok->model, name, err);
    if (st == VH_OK)
        st = vh_piece_table_build(&tok->table, tok->model.pieces, tok->model.n_pieces, name, err);
    if (st == VH_OK) st = index_pieces(tok, name, err);
    if (st != VH_OK) {
        vh_tokenizer_free(tok);
        return st;
    }
    tok->normalizer = (vh_text_normalizer){
        .add_dummy_prefix = tok->model.add_dummy_prefix,
        .remove_extra_whitespaces = tok->model.remove_extra_whitespaces,
        .escape_whitespaces = tok->model.escape_whitespaces,
        .treat_whitespace_as_suffix = tok->model.treat_whitespace_as_suffix,
        .user_defined = &tok->user_defined,
    };
    tok->bos_id = control_id(tok, tok->model.bos_piece);
    tok->eos_id = control_id(tok, tok->model.eos_piece);
    *out = tok;
    return VH_OK;
}

/* Read a whole regular file of at most VH_SP_MAX_MODEL_BYTES. */
static vh_status read_model_file(const char *path, uint8_t **data, size_t *size, vh_error *err)
{
    /* O_NONBLOCK: opening a FIFO must not hang; fstat then refuses it */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return vh_file_open_error(path, errno, err);
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "%s: cannot open: %s", path, strerror(errno));
    }
    struct stat sb;
    vh_status st = VH_OK;
    uint8_t *buf = NULL;
    if (fstat(fileno(f), &sb) != 0) {
        st = vh_error_set(err, VH_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    } else if (S_ISDIR(sb.st_mode)) {
        st = vh_error_set(err, VH_ERR_IO, "%s: is a directory", path);
    } else if (!S_ISREG(sb.st_mode)) {
        st = vh_error_set(err, VH_ERR_IO, "%s: is not a regular file", path);
    } else if ((uint64_t)sb.st_size > VH_SP_MAX_MODEL_BYTES) {
        st = vh_error_set(err, VH_ERR_BAD_MODEL, "%s: %lld bytes is larger than the %zu allowed",
                          path, (long long)sb.st_size, VH_SP_MAX_MODEL_BYTES);
    } else if (sb.st_size == 0) {
        st = vh_error_set(err, VH_ERR_BAD_MODEL, "%s: the file is empty", path);
    } else if (!(buf = malloc((size_t)sb.st_size))) {
        st = vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "%s: cannot allocate %lld bytes", path,
                          (long long)sb.st_size);
    } else if (fread(buf, 1, (size_t)sb.st_size, f) != (size_t)sb.st_size) {
        st = vh_error_set(err, VH_ERR_IO, "%s: short read", path);
    }
    fclose(f);
    if (st != VH_OK) {
        free(buf);
        return st;
    }
    *data = buf;
    *size = (size_t)sb.st_size;
    return VH_OK;
}

vh_status vh_tokenizer_load(const char *path, vh_tokenizer **out, vh_error *err)
{
    if (!out) return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "vh_tokenizer_load: out is NULL");
    *out = NULL;
    if (!path) return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "vh_tokenizer_load: path is NULL");
    uint8_t *data = NULL;
    size_t size = 0;
    vh_status st = read_model_file(path, &data, &size, err);
    if (st != VH_OK) return st;
    st = vh_tokenizer_load_bytes(data, size, path, out, err);
    free(data);
    return st;
}

void vh_tokenizer_free(vh_tokenizer *tok)
{
    if (!tok) return;
    vh_prefix_matcher_release(&tok->user_defined);
    vh_piece_table_release(&tok->table);
    vh_sp_model_release(&tok->model);
    free(tok->unused_slot);
    free(tok);
}

/* ---- encoding --------------------------------------------------------------------------- */

/* A symbol is a span of the normalized text; merging grows the left symbol over the right one,
 * which becomes empty. prev/next link the non-empty symbols. */
typedef struct bpe_symbol {
    uint32_t start, size;
    uint32_t prev, next; /* NO_SYMBOL at the ends */
    bool frozen;         /* a user-defined piece: never merged */
} bpe_symbol;

/* A candidate merge of symbols left and right into a piece of `size` bytes. It is stale once
 * either symbol has changed, which their sizes tell (they only grow or become empty). */
typedef struct bpe_pair {
    float score;
    uint32_t left, right;
    uint32_t size;
} bpe_pair;

/* How an UNUSED piece was last proposed: as the concatenation of these two spans. */
typedef struct bpe_split {
    uint32_t left_start, left_size, right_start, right_size;
    bool known;
} bpe_split;

typedef struct bpe_state {
    const vh_tokenizer *tok;
    const uint8_t *text;    /* normalized */
    bpe_symbol *symbols;
    bpe_pair *heap;         /* max-heap: highest score first, then leftmost */
    size_t heap_size;
    bpe_split *splits;      /* [tok->n_unused], NULL when the model has no UNUSED piece */
    uint64_t steps;         /* heap moves and merge candidates looked up: the encode's work */
} bpe_state;

/* Is pair a to be merged before pair b? sentencepiece's order: higher score, then leftmost.
 * Stale pairs are skipped when popped, and each symbol has at most one valid pair to its right
 * at a time, so this order alone decides the merges. */
static bool pair_before(const bpe_pair *a, const bpe_pair *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

/* The heap has room for every push (see vh_tokenizer_encode), so pushing cannot fail. */
static void heap_push(bpe_state *s, bpe_pair pair)
{
    size_t i = s->heap_size++;
    s->steps++;
    while (i > 0) {
        s->steps++;
        size_t parent = (i - 1) / 2;
        if (!pair_before(&pair, &s->heap[parent])) break;
        s->heap[i] = s->heap[parent];
        i = parent;
    }
    s->heap[i] = pair;
}

static bpe_pair heap_pop(bpe_state *s)
{
    bpe_pair top = s->heap[0];
    bpe_pair last = s->heap[--s->heap_size];
    size_t i = 0, n = s->heap_size;
    s->steps++;
    for (;;) {
        s->steps++;
        size_t child = 2 * i + 1;
        if (child >= n) break;
        if (child + 1 < n && pair_before(&s->heap[child + 1], &s->heap[child])) child++;
        if (!pair_before(&s->heap[child], &last)) break;
        s->heap[i] = s->heap[child];
        i = child;
    }
    if (n > 0) s->heap[i] = last;
    return top;
}

/* Queue the merge of symbols left and right if their concatenation is a normal piece. */
static void propose_pair(bpe_state *s, uint32_t left, uint32_t right)
{
    if (left == NO_SYMBOL || right == NO_SYMBOL) return;
    const bpe_symbol *l = &s->symbols[left], *r = &s->symbols[right];
    if (l->frozen || r->frozen) return;
    uint32_t size = l->size + r->size;
    s->steps++;
    int32_t id = vh_piece_table_find(&s->tok->table, s->text + l->start, size).normal_id;
    if (id < 0) return;
    const vh_sp_piece *piece = &s->tok->model.pieces[id];
    heap_push(s, (bpe_pair){piece->score, left, right, size});
    if (piece->type == VH_SP_PIECE_UNUSED) {
        /* Later proposals overwrite earlier ones, as sentencepiece's rev_merge map does. */
        s->splits[s->tok->unused_slot[id]] =
            (bpe_split){l->start, l->size, r->start, r->size, true};
    }
}

/* Length of the symbol starting text[0 .. size): a user-defined piece (frozen), else one
 * character as its lead byte announces it. */
static size_t symbol_length(const vh_tokenizer *tok, const uint8_t *text, size_t size,
                            bool *frozen)
{
    size_t len = vh_prefix_matcher_longest(&tok->user_defined, text, size);
    *frozen = len > 0;
    if (len == 0) {
        len = vh_utf8_lead_len(text[0]);
        if (len > size) len = size;
    }
    return len;
}

static uint32_t count_symbols(const vh_tokenizer *tok, const uint8_t *text, uint32_t size)
{
    uint32_t n = 0;
    bool frozen;
    for (uint32_t pos = 0; pos < size; n++)
        pos += (uint32_t)symbol_length(tok, text + pos, size - pos, &frozen);
    return n;
}

/* Split the normalized text into symbols and merge them, best pair first. */
static void merge_symbols(bpe_state *s, uint32_t text_size)
{
    uint32_t n = 0;
    for (uint32_t pos = 0; pos < text_size; n++) {
        bool frozen;
        uint32_t len = (uint32_t)symbol_length(s->tok, s->text + pos, text_size - pos, &frozen);
        s->symbols[n] = (bpe_symbol){pos, len, n == 0 ? NO_SYMBOL : n - 1, NO_SYMBOL, frozen};
        if (n > 0) s->symbols[n - 1].next = n;
        pos += len;
    }
    for (uint32_t i = 1; i < n; i++) propose_pair(s, i - 1, i);

    while (s->heap_size > 0) {
        bpe_pair top = heap_pop(s);
        bpe_symbol *l = &s->symbols[top.left], *r = &s->symbols[top.right];
        if (l->size == 0 || r->size == 0 || l->size + r->size != top.size) continue; /* stale */
        l->size += r->size;
        l->next = r->next;
        if (r->next != NO_SYMBOL) s->symbols[r->next].prev = top.left;
        r->size = 0;
        propose_pair(s, l->prev, top.left);
        propose_pair(s, top.left, l->next);
    }
}

/* Appends ids the way sentencepiece's PopulateSentencePieceText turns pieces into ids. */
typedef struct id_writer {
    int32_t *ids;
    size_t n;
    bool prev_unknown;
} id_writer;

static vh_status emit_piece(const vh_tokenizer *tok, const uint8_t *text, uint32_t start,
                            uint32_t size, id_writer *w, vh_error *err)
{
    int32_t id = lookup_id(tok, text + start, size);
    if (id < 0) id = tok->unk_id;
    vh_sp_piece_type type = tok->model.pieces[id].type;
    bool unknown = type == VH_SP_PIECE_UNKNOWN;
    if (type == VH_SP_PIECE_CONTROL) {
        /* sentencepiece fails too: a control piece consumes no text. */
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT,
                            "the text contains \"%.*s\", which is the control piece %d and cannot "
                            "be encoded",
                            (int)size, (const char *)text + start, id);
    }
    if (unknown && tok->model.byte_fallback) {
        for (uint32_t i = 0; i < size; i++) w->ids[w->n++] = tok->byte_ids[text[start + i]];
    } else if (!(unknown && w->prev_unknown)) {
        w->ids[w->n++] = id; /* a run of unknown symbols becomes one unk id */
    }
    w->prev_unknown = unknown;
    return VH_OK;
}

/* Emit a final symbol, splitting UNUSED pieces back into the pair last proposed for them
 * (sentencepiece's resegmentation). stack has room for 2 (sym->size + 1) words. */
static vh_status emit_symbol(const bpe_state *s, const bpe_symbol *sym, uint32_t *stack,
                             id_writer *w, vh_error *err)
{
    const vh_tokenizer *tok = s->tok;
    if (!s->splits) return emit_piece(tok, s->text, sym->start, sym->size, w, err);

    size_t depth = 0;
    stack[depth++] = sym->start, stack[depth++] = sym->size;
    while (depth > 0) {
        uint32_t size = stack[--depth], start = stack[--depth];
        int32_t id = lookup_id(tok, s->text + start, size);
        if (id >= 0 && tok->model.pieces[id].type == VH_SP_PIECE_UNUSED) {
            const bpe_split *split = &s->splits[tok->unused_slot[id]];
            if (split->known) {
                stack[depth++] = split->right_start, stack[depth++] = split->right_size;
                stack[depth++] = split->left_start, stack[depth++] = split->left_size;
                continue;
            }
        }
        vh_status st = emit_piece(tok, s->text, start, size, w, err);
        if (st != VH_OK) return st;
    }
    return VH_OK;
}

vh_status vh_tokenizer_encode(const vh_tokenizer *tok, const char *text, size_t len,
                              int32_t **ids, size_t *n_ids, vh_error *err)
{
    return vh_tokenizer_encode_counted(tok, text, len, ids, n_ids, NULL, err);
}

vh_status vh_tokenizer_encode_counted(const vh_tokenizer *tok, const char *text, size_t len,
                                      int32_t **ids, size_t *n_ids, uint64_t *steps, vh_error *err)
{
    if (steps) *steps = 0;
    if (!tok || !ids || !n_ids)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "vh_tokenizer_encode: NULL argument");
    *ids = NULL;
    *n_ids = 0;
    if (!text && len > 0)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "vh_tokenizer_encode: text is NULL");
    if (len > VH_TOKENIZER_MAX_TEXT_BYTES)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT,
                            "vh_tokenizer_encode: %zu bytes of text is more than the %zu allowed",
                            len, VH_TOKENIZER_MAX_TEXT_BYTES);
    if (len == 0) return VH_OK;

    /* The normalized text is at most 3 len + 3 bytes, which fits in uint32_t for the length
     * limit above. */
    size_t capacity = vh_text_normalized_capacity(len);
    if (capacity == 0 || capacity > UINT32_MAX)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "vh_tokenizer_encode: text too long");
    uint8_t *normalized = malloc(capacity);
    if (!normalized)
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY,
                            "vh_tokenizer_encode: out of memory for %zu bytes of text", len);
    uint32_t normalized_size =
        (uint32_t)vh_text_normalize(&tok->normalizer, (const uint8_t *)text, len, normalized);
    uint32_t n_symbols = count_symbols(tok, normalized, normalized_size);

    /* Buffers: the heap never holds more than 2 n_symbols pairs (n_symbols - 1 at the start,
     * then each merge pops one and pushes at most two, and there are < n_symbols merges); at
     * most one id per normalized byte (byte fallback); the split stack holds two words per
     * pending span, and the pending spans of a symbol are non-empty with sizes adding up to at
     * most the symbol's. */
    bpe_state s = {.tok = tok, .text = normalized};
    id_writer w = {0};
    uint32_t *stack = NULL;
    s.symbols = malloc(((size_t)n_symbols + 1) * sizeof *s.symbols);
    s.heap = malloc(((size_t)n_symbols * 2 + 1) * sizeof *s.heap);
    w.ids = malloc(((size_t)normalized_size + 1) * sizeof *w.ids);
    bool out_of_memory = !s.symbols || !s.heap || !w.ids;
    if (tok->n_unused > 0) {
        stack = malloc(((size_t)normalized_size * 2 + 2) * sizeof *stack);
        s.splits = calloc(tok->n_unused, sizeof *s.splits);
        out_of_memory |= !stack || !s.splits;
    }
    vh_status st = VH_OK;
    if (out_of_memory) {
        st = vh_error_set(err, VH_ERR_OUT_OF_MEMORY,
                          "vh_tokenizer_encode: out of memory for %zu bytes of text", len);
        goto done;
    }

    merge_symbols(&s, normalized_size);
    if (steps) *steps = s.steps;
    /* Symbol 0 is never merged away (merges keep the left symbol), so the chain starts there. */
    for (uint32_t i = n_symbols > 0 ? 0 : NO_SYMBOL; i != NO_SYMBOL; i = s.symbols[i].next) {
        st = emit_symbol(&s, &s.symbols[i], stack, &w, err);
        if (st != VH_OK) goto done;
    }

done:
    free(normalized);
    free(s.symbols);
    free(s.heap);
    free(stack);
    free(s.splits);
    if (st != VH_OK || w.n == 0) {
        free(w.ids);
        return st;
    }
    int32_t *shrunk = realloc(w.ids, w.n * sizeof *shrunk);
    *ids = shrunk ? shrunk : w.ids;
    *n_ids = w.n;
    return VH_OK;
}

/* ---- vocabulary ------------------------------------------------------------------------- */

int32_t vh_tokenizer_bos_id(const vh_tokenizer *tok) { return tok->bos_id; }

int32_t vh_tokenizer_eos_id(const vh_tokenizer *tok) { return tok->eos_id; }

int32_t vh_tokenizer_unk_id(const vh_tokenizer *tok) { return tok->unk_id; }

uint32_t vh_tokenizer_vocab_size(const vh_tokenizer *tok) { return tok->model.n_pieces; }

int32_t vh_tokenizer_piece_to_id(const vh_tokenizer *tok, const char *piece)
{
    if (!piece) return -1;
    return lookup_id(tok, piece, strlen(piece));
}

const char *vh_tokenizer_id_to_piece(const vh_tokenizer *tok, int32_t id)
{
    if (id < 0 || (uint32_t)id >= tok->model.n_pieces) return NULL;
    return tok->model.pieces[id].text;
}
