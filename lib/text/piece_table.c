#include "text/piece_table.h"

#include <stdlib.h>
#include <string.h>

struct vh_piece_table_slot {
    uint32_t hash;         /* low bits of the text's hash, to skip most memcmp calls */
    vh_piece_ids ids;      /* both -1: the slot is empty */
};

/* 64-bit FNV-1a. */
static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static int slot_is_empty(const vh_piece_table_slot *s)
{
    return s->ids.normal_id < 0 && s->ids.reserved_id < 0;
}

/* The slot holding text, or the empty slot where it would go. */
static vh_piece_table_slot *find_slot(const vh_piece_table *t, const uint8_t *text, size_t size,
                                      uint64_t h)
{
    for (size_t i = (size_t)h & t->mask;; i = (i + 1) & t->mask) {
        vh_piece_table_slot *s = &t->slots[i];
        if (slot_is_empty(s)) return s;
        if (s->hash != (uint32_t)h) continue;
        const vh_sp_piece *p = &t->pieces[s->ids.normal_id >= 0 ? s->ids.normal_id
                                                                 : s->ids.reserved_id];
        if (p->size == size && memcmp(p->text, text, size) == 0) return s;
    }
}

vh_status vh_piece_table_build(vh_piece_table *table, const vh_sp_piece *pieces,
                               uint32_t n_pieces, const char *name, vh_error *err)
{
    memset(table, 0, sizeof *table);
    /* A power of two at least twice the piece count keeps probe sequences short. */
    size_t n_slots = 16;
    while (n_slots < (size_t)n_pieces * 2) {
        if (__builtin_mul_overflow(n_slots, 2, &n_slots))
            return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: too many pieces", name);
    }
    vh_piece_table_slot *slots = malloc(n_slots * sizeof *slots);
    if (!slots)
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "%s: cannot allocate a table of %zu slots",
                            name, n_slots);
    for (size_t i = 0; i < n_slots; i++) slots[i] = (vh_piece_table_slot){0, {-1, -1}};
    table->slots = slots;
    table->mask = n_slots - 1;
    table->pieces = pieces;

    for (uint32_t id = 0; id < n_pieces; id++) {
        const vh_sp_piece *p = &pieces[id];
        uint64_t h = hash_bytes((const uint8_t *)p->text, p->size);
        vh_piece_table_slot *s = find_slot(table, (const uint8_t *)p->text, p->size, h);
        int32_t *id_slot = vh_piece_type_is_normal(p->type) ? &s->ids.normal_id
                                                            : &s->ids.reserved_id;
        if (*id_slot >= 0) {
            vh_status st = vh_error_set(err, VH_ERR_BAD_MODEL,
                                        "%s: piece %u \"%s\" is already defined as piece %d",
                                        name, id, p->text, *id_slot);
            vh_piece_table_release(table);
            return st;
        }
        s->hash = (uint32_t)h;
        *id_slot = (int32_t)id;
    }
    return VH_OK;
}

vh_piece_ids vh_piece_table_find(const vh_piece_table *table, const void *text, size_t size)
{
    const uint8_t *bytes = text;
    return find_slot(table, bytes, size, hash_bytes(bytes, size))->ids;
}

void vh_piece_table_release(vh_piece_table *table)
{
    if (!table) return;
    free(table->slots);
    memset(table, 0, sizeof *table);
}
