#include "text/string_table.h"

#include <stdlib.h>
#include <string.h>

struct vh_string_table_slot {
    uint64_t hash;
    size_t offset;  /* of the key in the arena */
    uint32_t size;  /* of the key */
    int32_t id;     /* -1: the slot is empty */
};

static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull; /* 64-bit FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

void vh_string_table_init(vh_string_table *t) { memset(t, 0, sizeof *t); }

static vh_string_table_slot *find_slot(const vh_string_table *t, const void *text, size_t size,
                                       uint64_t h)
{
    for (size_t i = (size_t)h & t->mask;; i = (i + 1) & t->mask) {
        vh_string_table_slot *s = &t->slots[i];
        if (s->id < 0) return s;
        if (s->hash == h && s->size == size && memcmp(t->arena + s->offset, text, size) == 0)
            return s;
    }
}

/* Keep the load at most one half. */
static vh_status grow(vh_string_table *t, vh_error *err)
{
    size_t n_slots = t->slots ? (t->mask + 1) * 2 : 64;
    vh_string_table_slot *slots = malloc(n_slots * sizeof *slots);
    if (!slots) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (string table)");
    for (size_t i = 0; i < n_slots; i++) slots[i].id = -1;
    vh_string_table old = *t;
    t->slots = slots;
    t->mask = n_slots - 1;
    for (size_t i = 0; old.slots && i <= old.mask; i++) {
        const vh_string_table_slot *s = &old.slots[i];
        if (s->id < 0) continue;
        *find_slot(t, t->arena + s->offset, s->size, s->hash) = *s;
    }
    free(old.slots);
    return VH_OK;
}

vh_status vh_string_table_put(vh_string_table *t, const void *text, size_t size, int32_t id,
                              vh_error *err)
{
    if (size > UINT32_MAX) return vh_error_set(err, VH_ERR_BAD_MODEL, "a key of %zu bytes", size);
    if ((t->count + 1) * 2 > (t->slots ? t->mask + 1 : 0)) {
        vh_status st = grow(t, err);
        if (st) return st;
    }
    uint64_t h = hash_bytes(text, size);
    vh_string_table_slot *s = find_slot(t, text, size, h);
    if (s->id >= 0) {
        s->id = id;
        return VH_OK;
    }
    if (!t->arena || t->arena_size + size > t->arena_capacity) {
        size_t capacity = t->arena_capacity ? t->arena_capacity : 4096;
        while (capacity < t->arena_size + size) capacity *= 2;
        char *arena = realloc(t->arena, capacity);
        if (!arena) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (string table)");
        t->arena = arena;
        t->arena_capacity = capacity;
    }
    if (size) memcpy(t->arena + t->arena_size, text, size);
    *s = (vh_string_table_slot){h, t->arena_size, (uint32_t)size, id};
    t->arena_size += size;
    t->count++;
    return VH_OK;
}

int32_t vh_string_table_get(const vh_string_table *t, const void *text, size_t size)
{
    if (!t->slots) return -1;
    return find_slot(t, text, size, hash_bytes(text, size))->id;
}

void vh_string_table_release(vh_string_table *t)
{
    free(t->slots);
    free(t->arena);
    memset(t, 0, sizeof *t);
}
